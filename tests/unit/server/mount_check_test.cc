#include "server/mount_check.h"

#include <gtest/gtest.h>

namespace magnetar::server {
namespace {

// As a VM with its root on ext4 with online discard and a tmpfs and a
// second disk on top shows it.
constexpr const char* kMountinfo =
    "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard,resv_strict\n"
    "23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "30 22 0:26 / /tmp rw,nosuid,nodev shared:14 - tmpfs tmpfs rw,size=1024k\n"
    "31 22 254:16 / /var/lib/magnetar rw,noatime shared:15 - xfs /dev/vdb rw,attr2,inode64\n"
    "32 22 254:32 / /srv/data\\040disk rw,relatime - ext4 /dev/vdc rw,discard\n"
    "not a mountinfo line\n";

TEST(MountCheckTest, FindsTheMountHoldingAPath) {
  auto m = mount_of(kMountinfo, "/var/lib/magnetar/data");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->mount_point, "/var/lib/magnetar");
  EXPECT_EQ(m->fs_type, "xfs");
  EXPECT_EQ(m->source, "/dev/vdb");
  EXPECT_FALSE(has_mount_option(m->options, "discard"));

  m = mount_of(kMountinfo, "/home/me/magnetar/data");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->mount_point, "/");
  EXPECT_TRUE(has_mount_option(m->options, "discard"));  // from the file system's own options
  EXPECT_TRUE(has_mount_option(m->options, "relatime"));  // from the mount's

  // A mount point is a whole path component: /tmpfoo is not under /tmp.
  EXPECT_EQ(mount_of(kMountinfo, "/tmpfoo/x")->mount_point, "/");
  EXPECT_EQ(mount_of(kMountinfo, "/tmp")->mount_point, "/tmp");
  // Escaped spaces in mount points.
  m = mount_of(kMountinfo, "/srv/data disk/magnetar");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->mount_point, "/srv/data disk");
  EXPECT_TRUE(has_mount_option(m->options, "discard"));

  EXPECT_FALSE(mount_of("", "/x").has_value());
  EXPECT_FALSE(mount_of("garbage\n", "/x").has_value());
}

TEST(MountCheckTest, OptionsAreMatchedWhole) {
  EXPECT_TRUE(has_mount_option("rw,discard", "discard"));
  EXPECT_TRUE(has_mount_option("discard", "discard"));
  EXPECT_FALSE(has_mount_option("rw,nodiscard", "discard"));
  EXPECT_FALSE(has_mount_option("rw,discard=async", "discard"));
  EXPECT_FALSE(has_mount_option("", "discard"));
}

}  // namespace
}  // namespace magnetar::server
