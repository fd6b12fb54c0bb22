// LazyMap: a std::map that costs one pointer until something is put in it.
//
// For maps that most objects of their kind never fill (a subscription's
// entries to send again, a topic's producers, a cursor's partly
// acknowledged batches) when many thousands of those objects stay loaded:
// an empty std::map is 48 bytes, this is 8. Reads of an empty one allocate
// nothing; the first insertion makes the map and clear() frees it.
// Iterators are the std::map's and stay valid as they would there; those an
// empty LazyMap hands out all equal end().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>

namespace magnetar::common {

template <typename K, typename V, typename Compare = std::less<K>>
class LazyMap {
 public:
  using Map = std::map<K, V, Compare>;
  using iterator = typename Map::iterator;
  using const_iterator = typename Map::const_iterator;

  LazyMap() = default;
  LazyMap(const LazyMap& other) : map_(other.map_ ? std::make_unique<Map>(*other.map_) : nullptr) {}
  LazyMap& operator=(const LazyMap& other) {
    if (this != &other) map_ = other.map_ ? std::make_unique<Map>(*other.map_) : nullptr;
    return *this;
  }
  LazyMap(LazyMap&&) noexcept = default;
  LazyMap& operator=(LazyMap&&) noexcept = default;

  bool empty() const { return !map_ || map_->empty(); }
  size_t size() const { return map_ ? map_->size() : 0; }

  iterator begin() { return map_ ? map_->begin() : none().begin(); }
  iterator end() { return map_ ? map_->end() : none().end(); }
  const_iterator begin() const { return map_ ? map_->cbegin() : none().cbegin(); }
  const_iterator end() const { return map_ ? map_->cend() : none().cend(); }

  size_t count(const K& k) const { return map_ ? map_->count(k) : 0; }
  iterator find(const K& k) { return map_ ? map_->find(k) : end(); }
  const_iterator find(const K& k) const { return map_ ? map_->find(k) : end(); }
  iterator lower_bound(const K& k) { return map_ ? map_->lower_bound(k) : end(); }
  const_iterator lower_bound(const K& k) const { return map_ ? map_->lower_bound(k) : end(); }
  iterator upper_bound(const K& k) { return map_ ? map_->upper_bound(k) : end(); }
  const_iterator upper_bound(const K& k) const { return map_ ? map_->upper_bound(k) : end(); }

  V& operator[](const K& k) { return map()[k]; }
  template <typename... Args>
  std::pair<iterator, bool> emplace(Args&&... args) {
    return map().emplace(std::forward<Args>(args)...);
  }

  size_t erase(const K& k) { return map_ ? map_->erase(k) : 0; }
  iterator erase(iterator it) { return map_->erase(it); }
  iterator erase(iterator first, iterator last) { return first == last ? last : map_->erase(first, last); }
  // Frees the map as well.
  void clear() { map_.reset(); }

 private:
  Map& map() {
    if (!map_) map_ = std::make_unique<Map>();
    return *map_;
  }
  // What an empty LazyMap's iterators point into; never changed.
  static Map& none() {
    static Map empty;
    return empty;
  }

  std::unique_ptr<Map> map_;
};

}  // namespace magnetar::common
