// The one translation unit that compiles Asio and Beast (separate compilation): every other
// file only includes their declarations, which keeps the build fast on two cores.
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
