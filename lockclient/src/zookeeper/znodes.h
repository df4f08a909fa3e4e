// The lock recipe's znode names. Private to lockclient.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fencekit::lockclient::zk {

// Bytes as lowercase hex, and back (an odd last digit is dropped).
std::string Hex(std::string_view bytes);
std::string Unhex(std::string_view hex);

// A lock name as one znode name: A-Z a-z 0-9 _ - as they are, every other byte %XX (so no '/',
// and never "." or "..").
std::string Escape(std::string_view lock);

// A contender's znode is "<owner in hex>-lock-<sequence>", the sequence ten digits ZooKeeper
// adds: ContenderPrefix(owner) is what it is created as, OwnerOf its owner ("" for another
// znode), SequenceOf its sequence.
std::string ContenderPrefix(std::string_view owner);
std::string OwnerOf(const std::string& child);
std::string SequenceOf(const std::string& child);

// The line: contenders' znodes only, in the order ZooKeeper created them.
void SortLine(std::vector<std::string>& children);

}  // namespace fencekit::lockclient::zk
