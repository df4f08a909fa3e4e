// The translation unit that precompiles cmake/pch.cmake's headers; it has no code of its own.
