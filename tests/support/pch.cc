// The translation unit that precompiles the tests' headers (tests/CMakeLists.txt); no code.
