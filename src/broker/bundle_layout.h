// Bundle layouts: where each namespace's bundles begin and end.
//
// A namespace starts as kBundlesPerNamespace equal ranges of the 32-bit
// topic hash (ownership.h). A split cuts one range into pieces, as Pulsar's
// bundle split does: by hand (REST, CLI) or by the load manager when a
// bundle carries too much. A layout other than the default is kept at
// "/bundle-layouts/<tenant>/<namespace>" as its boundaries,
// "0x00000000,0x20000000,0x40000000,...,0xffffffff", and changes only by
// compare-and-set; bundles are never merged back.
//
// Every process holds one view of the layouts (layout_of), filled at start
// and kept current by BundleLayoutWatch, so bundle_of() costs no metadata
// read. A split commits the new layout to the store, then to this view.
//
// Threads: every function from any thread; callbacks on any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "broker/naming.h"
#include "common/result.h"
#include "metadata/store.h"
#include "runtime/component.h"

namespace magnetar::broker {

// N+1 ascending hash values for N bundles: the first is 0, the last
// 0xffffffff. Bundle i is [b[i], b[i+1]), the last one including 0xffffffff.
using Boundaries = std::vector<uint32_t>;

// A namespace's bundles never exceed this many (Pulsar's
// loadBalancerNamespaceMaximumBundles default).
inline constexpr size_t kMaxBundlesPerNamespace = 128;

Boundaries default_boundaries();
// "0x00000000,0x40000000,...": how a layout is stored.
std::string encode_boundaries(const Boundaries& boundaries);
// InvalidArgument unless ascending from 0 to 0xffffffff with 2 to
// kMaxBundlesPerNamespace + 1 values.
common::Result<Boundaries> decode_boundaries(std::string_view text);

// "0x00000000_0x40000000": a bundle's name, Pulsar's form.
std::string range_name(uint32_t low, uint32_t high);
// The two ends of a bundle name; InvalidArgument for anything else.
common::Result<std::pair<uint32_t, uint32_t>> parse_range(std::string_view name);

// A bundle named across namespaces, "tenant/namespace/0x########_0x########".
struct BundleName {
  NamespaceName ns;
  uint32_t low = 0;
  uint32_t high = 0;
};
// InvalidArgument for anything else.
common::Result<BundleName> parse_bundle(std::string_view bundle);

// The process's view of `ns`'s layout (the default until it is split),
// shared rather than copied: bundle_of() is on every ownership check.
std::shared_ptr<const Boundaries> layout(const NamespaceName& ns);
// The same, copied.
Boundaries layout_of(const NamespaceName& ns);
// Whether any namespace's layout is split (a quick answer for passes over
// every bundle).
bool any_split();
// Replaces the view of "tenant/namespace"; nullopt: back to the default.
void set_layout(const std::string& ns, std::optional<Boundaries> boundaries);

// The metadata key of `ns`'s layout.
std::string layout_key(const NamespaceName& ns);

// Where a bundle split cuts [low, high]: Pulsar's range_equally_divide and
// specified_positions_divide (`positions`, each strictly inside the range).
// InvalidArgument when the range is too narrow or a position is outside it,
// and FailedPrecondition when `current` pieces plus the new ones would
// exceed kMaxBundlesPerNamespace.
common::Result<std::vector<uint32_t>> split_cuts(uint32_t low, uint32_t high, const std::vector<uint32_t>& positions,
                                                  size_t current);

// A split of one bundle, checked against this process's view of its layout.
struct SplitPlan {
  NamespaceName ns;
  uint32_t low = 0;
  uint32_t high = 0;
  std::vector<uint32_t> cuts;
  std::vector<std::string> pieces;  // "tenant/namespace/range", in hash order
};
// Plans the split of `bundle` ("tenant/namespace/range") at `positions`
// (none: in halves). InvalidArgument for a bad name or position, NotFound
// when the namespace's layout has no such bundle, and split_cuts' errors.
common::Result<SplitPlan> plan_split(const std::string& bundle, const std::vector<uint32_t>& positions);

// Writes `ns`'s layout with bundle [low, high] cut at `cuts` (compare-and-set
// on the layout it reads), then updates this process's view. NotFound when
// the layout has no such bundle (already split, or never one); Aborted when
// the layout changed meanwhile.
void commit_split(metadata::Store& store, const NamespaceName& ns, uint32_t low, uint32_t high,
                  std::vector<uint32_t> cuts, std::function<void(common::Status)> done);

// Fills the process's view at start and follows the store's changes.
class BundleLayoutWatch final : public runtime::Component {
 public:
  explicit BundleLayoutWatch(metadata::Store& store) : store_(store) {}
  ~BundleLayoutWatch() override;
  std::string_view name() const override { return "bundle-layouts"; }
  // Reads every stored layout (blocking) and watches them.
  common::Status start() override;
  void stop() override;

 private:
  metadata::Store& store_;
  metadata::WatchId watch_ = 0;
};

}  // namespace magnetar::broker
