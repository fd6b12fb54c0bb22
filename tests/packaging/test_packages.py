"""The .deb and .rpm built from this tree: their contents and metadata, the
.deb installed with dpkg into a scratch root (maintainer scripts included)
and on a throwaway copy of this machine, the packaged binary run the way
magnetar.service runs it, an upgrade that keeps the admin's config and the
node's data, then remove and purge; the .rpm's config handling likewise.

The packages are made by cpack from the build directory's CPackConfig.cmake
(CPACK_CONFIG), from the binary already built there: no recompilation.
"""
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

CPACK_CONFIG = os.environ["CPACK_CONFIG"]
BUILD_BIN = os.environ["MAGNETAR_BIN"]
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
UNIT = "usr/lib/systemd/system/magnetar.service"
CONFIG = "etc/magnetar/magnetar.toml"

WORK = None
DEB = None       # release as configured (MAGNETAR_PACKAGE_RELEASE)
DEB_NEXT = None  # the same build, release + 1: the upgrade
RPM = None
RPM_NEXT = None
VERSION = None   # the project version the binary reports


def run(*args, check=True, env=None, timeout=300):
    r = subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{shlex.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def cpack(generator, out_dir, *defines):
    args = ["cpack", "--config", CPACK_CONFIG, "-G", generator, "-B", out_dir]
    for d in defines:
        args += ["-D", d]
    run(*args)
    ext = {"DEB": ".deb", "RPM": ".rpm"}[generator]
    found = [f for f in os.listdir(out_dir) if f.endswith(ext)]
    assert len(found) == 1, found
    return os.path.join(out_dir, found[0])


def setUpModule():
    global WORK, DEB, DEB_NEXT, RPM, RPM_NEXT, VERSION
    WORK = tempfile.mkdtemp(prefix="magnetar-packages-")
    os.chmod(WORK, 0o755)  # the service account reads the scratch roots below
    VERSION = json.loads(run(BUILD_BIN, "version", "--json").stdout)["version"]
    DEB = cpack("DEB", os.path.join(WORK, "deb"))
    release = int(deb_field(DEB, "Version").rsplit("-", 1)[1])
    DEB_NEXT = cpack("DEB", os.path.join(WORK, "deb-next"), f"CPACK_DEBIAN_PACKAGE_RELEASE={release + 1}")
    RPM = cpack("RPM", os.path.join(WORK, "rpm"))
    release = int(run("rpm", "-qp", "--qf", "%{RELEASE}", RPM).stdout)
    RPM_NEXT = cpack("RPM", os.path.join(WORK, "rpm-next"), f"CPACK_RPM_PACKAGE_RELEASE={release + 1}")


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def deb_field(deb, field):
    return run("dpkg-deb", "-f", deb, field).stdout.strip()


def make_root():
    """An empty system for dpkg --root: a dpkg database, root's account and
    systemd's own targets (for systemd-analyze verify --root)."""
    root = tempfile.mkdtemp(prefix="root-", dir=WORK)
    os.chmod(root, 0o755)
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "var/log", "etc",
              "usr/lib/systemd/system", "run"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for name, text, mode in (("var/lib/dpkg/status", "", 0o644), ("var/lib/dpkg/available", "", 0o644),
                             ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0o644),
                             ("etc/group", "root:x:0:\n", 0o644),
                             ("etc/shadow", "root:*:19000:0:99999:7:::\n", 0o640),
                             ("etc/gshadow", "root:*::\n", 0o640)):
        path = os.path.join(root, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
    return root


def dpkg(root, *args, check=True):
    # Maintainer scripts run outside the root with DPKG_ROOT set; ours honour
    # it. The root has no library packages: dependencies are checked against
    # this machine in test_deb_dependencies_are_installable instead.
    return run("dpkg", f"--root={root}", f"--log={root}/var/log/dpkg.log", "--force-script-chrootless",
               "--force-depends", *args, check=check)


def account(root, name="magnetar"):
    with open(os.path.join(root, "etc/passwd")) as f:
        for line in f:
            fields = line.rstrip("\n").split(":")
            if fields[0] == name:
                return {"uid": int(fields[2]), "gid": int(fields[3]), "home": fields[5], "shell": fields[6]}
    return None


def unit_settings(root):
    settings = {}
    with open(os.path.join(root, UNIT)) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "[")):
                key, _, value = line.partition("=")
                settings.setdefault(key, []).append(value)
    return settings


class ServiceRun:
    """The packaged binary started as magnetar.service starts it: its
    ExecStart (paths inside the scratch root), as User=/Group=, in
    WorkingDirectory=, with a $NOTIFY_SOCKET to receive READY=1 and
    STOPPING=1. Only the ports are moved to free ones and the data dir into
    the root (flags after --config win)."""

    def __init__(self, root):
        self.root = root
        unit = unit_settings(root)
        self.unit = unit
        argv = shlex.split(unit["ExecStart"][0])
        self.argv = [os.path.join(root, a.lstrip("/")) if a.startswith("/") else a for a in argv]
        self.data_dir = os.path.join(root, "var/lib/magnetar")
        self.argv += ["--data-dir", self.data_dir, "--http-port", "0", "--pulsar-port", "0",
                      "--kafka-port", "0", "--amqp-port", "0", "--reactors", "1"]
        user = account(root, unit["User"][0])
        self.uid, self.gid = user["uid"], user["gid"]
        self.cwd = os.path.join(root, unit["WorkingDirectory"][0].lstrip("/"))

        self.notify_path = os.path.join(root, "run", "notify")
        if os.path.exists(self.notify_path):
            os.unlink(self.notify_path)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        os.chmod(self.notify_path, 0o666)
        self.log_path = os.path.join(root, "run", "magnetar.log")
        env = {"PATH": "/usr/bin:/bin", "NOTIFY_SOCKET": self.notify_path}
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, env=env, user=self.uid, group=self.gid,
                                     extra_groups=[], stdout=self.log, stderr=subprocess.STDOUT)

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_notice(self, key):
        """The next notice to the service manager, which must carry `key`."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self.notify.settimeout(0.2)
            try:
                notice = self.notify.recv(4096).decode()
            except socket.timeout:
                if self.proc.poll() is not None:
                    raise AssertionError(f"magnetar exited {self.proc.returncode}: {self.read_log()}")
                continue
            fields = dict(line.split("=", 1) for line in notice.splitlines() if "=" in line)
            if key in fields:
                return fields
        raise AssertionError(f"no {key} within {START_TIMEOUT_S}s: {self.read_log()}")

    def ports(self):
        with open(os.path.join(self.data_dir, "ports.json")) as f:
            return json.load(f)

    def cli(self, *args):
        return run(self.argv[0], *args, "--url", f"pulsar://127.0.0.1:{self.ports()['pulsar']}", timeout=60)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        notice = self.wait_notice("STOPPING")
        code = self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.notify.close()
        self.log.close()
        return notice, code


class DebPackageTest(unittest.TestCase):
    def test_metadata_names_the_project_version_and_its_libraries(self):
        self.assertEqual(os.path.basename(DEB).split("_")[0], "magnetar")
        self.assertEqual(deb_field(DEB, "Package"), "magnetar")
        self.assertTrue(deb_field(DEB, "Version").startswith(VERSION + "-"), deb_field(DEB, "Version"))
        arch = run("dpkg", "--print-architecture").stdout.strip()
        self.assertEqual(deb_field(DEB, "Architecture"), arch)
        self.assertTrue(os.path.basename(DEB).endswith(f"_{arch}.deb"))
        depends = deb_field(DEB, "Depends")
        for lib in ("libuv1", "libleveldb1d", "libspdlog1.10", "libfmt9", "libprotobuf-lite32", "libc6"):
            self.assertIn(lib, depends)
        info = run("dpkg-deb", "-I", DEB).stdout
        for script in ("postinst", "prerm", "postrm", "conffiles"):
            self.assertIn(f" {script}", info)

    def test_deb_dependencies_are_installable(self):
        # Every dependency is satisfied by a package installed on this
        # machine, by name and version, or by its Provides.
        installed, provided = {}, set()
        for line in run("dpkg-query", "-W", "-f=${db:Status-Abbrev}|${Package}|${Version}|${Provides}\n").stdout \
                .splitlines():
            status, name, version, provides = line.split("|")
            if status.startswith("ii"):
                installed[name] = version
                provided.update(p.strip().split(" ")[0] for p in provides.split(",") if p.strip())
        ops = {">=": "ge", "<=": "le", "=": "eq", ">>": "gt", "<<": "lt"}

        def satisfied(alt):
            name, _, constraint = alt.partition(" ")
            if name not in installed:
                return not constraint and name in provided
            if not constraint:
                return True
            op, version = constraint.strip("()").split()
            return run("dpkg", "--compare-versions", installed[name], ops[op], version, check=False).returncode == 0

        for clause in deb_field(DEB, "Depends").split(","):
            self.assertTrue(any(satisfied(a.strip()) for a in clause.split("|")), clause)

    def test_contents_and_conffile(self):
        listing = run("dpkg-deb", "-c", DEB).stdout
        entries = {line.split()[-1]: line.split()[0] for line in listing.splitlines()}
        self.assertEqual(entries["./usr/bin/magnetar"], "-rwxr-xr-x")
        self.assertEqual(entries["./" + CONFIG], "-rw-r--r--")
        self.assertEqual(entries["./" + UNIT], "-rw-r--r--")
        self.assertIn("./usr/share/doc/magnetar/packaging.md", entries)
        self.assertIn("./usr/share/man/man1/magnetar.1.gz", entries)
        self.assertIn("./usr/share/bash-completion/completions/magnetar", entries)
        extracted = os.path.join(WORK, "conffiles-check")
        run("dpkg-deb", "-e", DEB, extracted)
        with open(os.path.join(extracted, "conffiles")) as f:
            self.assertEqual(f.read().split(), ["/" + CONFIG])
        # The packaged binary is stripped and is the build's own version.
        contents = os.path.join(WORK, "contents-check")
        run("dpkg-deb", "-x", DEB, contents)
        binary = os.path.join(contents, "usr/bin/magnetar")
        self.assertLess(os.path.getsize(binary), os.path.getsize(BUILD_BIN))
        self.assertEqual(run(binary, "version").stdout.strip(), f"magnetar {VERSION}")

    def test_bash_completion_offers_the_packaged_binarys_commands_and_flags(self):
        contents = os.path.join(WORK, "completion-check")
        run("dpkg-deb", "-x", DEB, contents)
        script = os.path.join(contents, "usr/share/bash-completion/completions/magnetar")
        binary = os.path.join(contents, "usr/bin/magnetar")

        def complete(*words):
            probe = ('source "$0"; COMP_WORDS=("${@}"); COMP_CWORD=$(( $# - 1 )); _magnetar; '
                     'printf "%s\\n" "${COMPREPLY[@]}"')
            return run("bash", "-c", probe, script, binary, *words).stdout.split()

        self.assertEqual(sorted(complete("st")), ["standalone", "start"])
        self.assertEqual(set(complete("")), {"start", "standalone", "version", "produce", "consume", "perf", "admin",
                                             "trace", "tokens", "cluster"})
        self.assertEqual(sorted(complete("standalone", "--data-dir", "/tmp", "--http")),
                         ["--http-idle-timeout-secs", "--http-port", "--http-request-timeout-secs"])
        self.assertEqual(complete("start", "--eph"), ["--ephemeral"])
        self.assertEqual(complete("admin", "--json", "tenants", "cr"), ["create"])
        self.assertIn("--subscription", complete("consume", "my-topic", "--s"))

    def test_unit_file(self):
        contents = os.path.join(WORK, "unit-check")
        run("dpkg-deb", "-x", DEB, contents)
        root_unit = {k: v[-1] for k, v in unit_settings(contents).items()}
        expected = {"Type": "notify", "User": "magnetar", "Group": "magnetar", "NoNewPrivileges": "yes",
                    "ProtectSystem": "strict", "ReadWritePaths": "/var/lib/magnetar",
                    "LimitNOFILE": "1048576", "Restart": "on-failure", "RestartPreventExitStatus": "2", "WantedBy": "multi-user.target",
                    "ExecStart": "/usr/bin/magnetar standalone --config /etc/magnetar/magnetar.toml"}
        for key, value in expected.items():
            self.assertEqual(root_unit.get(key), value, key)

    def test_lintian(self):
        r = run("lintian", "--tag-display-limit", "0", "--suppress-tags-from-file",
                os.path.join(os.path.dirname(__file__), "lintian-suppressed-tags"), DEB, check=False)
        errors = [line for line in r.stdout.splitlines() if line.startswith(("E:", "W:"))]
        self.assertEqual(errors, [], r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class RpmPackageTest(unittest.TestCase):
    def query(self, *args):
        return run("rpm", "-qp", *args, RPM).stdout

    def test_metadata(self):
        name, version, release, arch = self.query("--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}").split()
        self.assertEqual((name, version), ("magnetar", VERSION))
        self.assertEqual(arch, os.uname().machine)
        self.assertEqual(os.path.basename(RPM), f"magnetar-{VERSION}-{release}.{arch}.rpm")
        info = self.query("-i")
        self.assertIn("Summary     : message broker", info)
        self.assertIn("/etc/magnetar/magnetar.toml", info)  # the description says where things live

    def test_contents_config_and_scripts(self):
        files = self.query("-l").split()
        for path in ("/usr/bin/magnetar", "/" + CONFIG, "/" + UNIT, "/usr/share/man/man1/magnetar.1.gz"):
            self.assertIn(path, files)
        # Directories owned by the system (filesystem, systemd) are not ours.
        for shared in ("/usr", "/usr/bin", "/etc", "/usr/lib/systemd/system"):
            self.assertNotIn(shared, files)
        self.assertEqual(self.query("--configfiles").split(), ["/" + CONFIG])
        # %config(noreplace) ("cn"): an edited config survives an upgrade.
        flags = self.query("--qf", "[%{FILEFLAGS:fflags} %{FILENAMES}\n]").splitlines()
        self.assertIn("cn /" + CONFIG, flags)
        scripts = self.query("--scripts")
        for phase in ("preinstall", "postinstall", "preuninstall", "postuninstall"):
            self.assertIn(f"{phase} scriptlet", scripts)
        self.assertIn("useradd --system", scripts)
        self.assertIn("systemctl --no-reload preset magnetar.service", scripts)
        requires = self.query("-R")
        for soname in ("libuv.so.1", "libspdlog.so.1.10", "libleveldb.so.1d"):
            self.assertIn(soname, requires)


    def test_upgrade_keeps_the_edited_config_and_erase_saves_it(self):
        # rpm into a scratch root: the payload and the %config handling are
        # real; the scriptlets need an RPM-based system and are not run here
        # (--noscripts), nor are the library requirements (--nodeps).
        root = tempfile.mkdtemp(prefix="rpmroot-", dir=WORK)
        query = ("rpm", f"--root={root}", "--dbpath=/var/lib/rpm")
        rpm = query + ("--nodeps", "--noscripts")
        run(*query, "--initdb")
        run(*rpm, "-i", RPM)
        self.assertEqual(run(*query, "-q", "magnetar").stdout.strip(),
                         os.path.basename(RPM)[:-len(".rpm")])
        config = os.path.join(root, CONFIG)
        with open(config, "a") as f:
            f.write('log-level = "warn"\n')
        with open(config) as f:
            edited = f.read()
        run(*rpm, "-U", RPM_NEXT)
        self.assertEqual(run(*query, "-q", "magnetar").stdout.strip(),
                         os.path.basename(RPM_NEXT)[:-len(".rpm")])
        with open(config) as f:
            self.assertEqual(f.read(), edited)
        self.assertFalse(os.path.exists(config + ".rpmnew"))
        run(*rpm, "-e", "magnetar")
        self.assertFalse(os.path.exists(os.path.join(root, "usr/bin/magnetar")))
        self.assertFalse(os.path.exists(config))
        with open(config + ".rpmsave") as f:
            self.assertEqual(f.read(), edited)


class InstalledServiceTest(unittest.TestCase):
    def test_install_run_upgrade_remove_purge(self):
        root = make_root()
        dpkg(root, "-i", DEB)
        status = run("dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f=${Status} ${Version}",
                     "magnetar").stdout
        self.assertEqual(status, f"install ok installed {deb_field(DEB, 'Version')}")
        conffiles = run("dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f=${Conffiles}",
                        "magnetar").stdout
        self.assertIn("/" + CONFIG, conffiles)

        # postinst: the account, its data directory, the unit enabled.
        user = account(root)
        self.assertIsNotNone(user, "no magnetar account")
        self.assertLess(user["uid"], 1000)  # a system account
        self.assertEqual((user["home"], user["shell"]), ("/var/lib/magnetar", "/usr/sbin/nologin"))
        data = os.stat(os.path.join(root, "var/lib/magnetar"))
        self.assertEqual((data.st_uid, data.st_gid, data.st_mode & 0o777), (user["uid"], user["gid"], 0o750))
        wants = os.path.join(root, "etc/systemd/system/multi-user.target.wants/magnetar.service")
        self.assertEqual(os.readlink(wants), "/" + UNIT)

        # The unit passes systemd's own check against the installed files.
        for pattern_dir in ("/lib/systemd/system",):
            for name in os.listdir(pattern_dir):
                if name.endswith((".target", ".slice")):
                    dest = os.path.join(root, "usr/lib/systemd/system", name)
                    if not os.path.lexists(dest):
                        shutil.copy(os.path.join(pattern_dir, name), dest, follow_symlinks=False)
        if shutil.which("systemd-analyze"):
            run("systemd-analyze", "verify", "--man=no", "--recursive-errors=one", f"--root={root}", "/" + UNIT)

        # Started the unit's way: READY=1 once it serves; a message goes in.
        node = ServiceRun(root)
        ready = node.wait_notice("READY")
        self.assertEqual(ready["READY"], "1")
        with urllib.request.urlopen(
                f"http://127.0.0.1:{node.ports()['http']}/admin/v2/brokers/health", timeout=10) as r:
            self.assertEqual(r.read().decode().strip(), "ok")
        node.cli("produce", "upgrade-check", "-m", "before-upgrade")
        notice, code = node.stop()
        self.assertEqual((notice["STOPPING"], code), ("1", 0), node.read_log())
        # The node ran as the service account: its files belong to it.
        self.assertEqual(os.stat(os.path.join(node.data_dir, "ports.json")).st_uid, user["uid"])

        # The admin edits the config; the upgrade keeps the edit and the data.
        config = os.path.join(root, CONFIG)
        with open(config) as f:
            edited = f.read().replace('log-level = "info"', 'log-level = "warn"')
        self.assertIn('log-level = "warn"', edited)
        with open(config, "w") as f:
            f.write(edited)
        dpkg(root, "-i", DEB_NEXT)
        status = run("dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f=${Version}", "magnetar").stdout
        self.assertEqual(status, deb_field(DEB_NEXT, "Version"))
        with open(config) as f:
            self.assertEqual(f.read(), edited)
        self.assertFalse(os.path.exists(config + ".dpkg-dist"))
        self.assertEqual(account(root), user)

        node = ServiceRun(root)
        node.wait_notice("READY")
        got = node.cli("consume", "upgrade-check", "-s", "after-upgrade", "-P", "Earliest", "-n", "1",
                       "--timeout", "10")
        self.assertEqual(got.stdout.strip(), "before-upgrade")
        notice, code = node.stop()
        self.assertEqual(code, 0, node.read_log())
        self.assertNotIn("[info]", node.read_log())  # log-level = "warn" from the edited config

        # Remove keeps the config, the data and the account; purge deletes them.
        dpkg(root, "--remove", "magnetar")
        self.assertFalse(os.path.exists(os.path.join(root, "usr/bin/magnetar")))
        self.assertTrue(os.path.exists(config))
        self.assertTrue(os.path.exists(os.path.join(root, "var/lib/magnetar/ports.json")))
        self.assertIsNotNone(account(root))
        dpkg(root, "--purge", "magnetar")
        self.assertFalse(os.path.exists(os.path.join(root, "etc/magnetar")))
        self.assertFalse(os.path.exists(os.path.join(root, "var/lib/magnetar")))
        self.assertIsNone(account(root))
        self.assertFalse(os.path.lexists(wants))


def enter_host_copy(top, packages):
    """In a private mount namespace (unshare -m): lays a copy-on-write overlay
    over this machine's root, copies `packages` into its /tmp and chroots
    into it. Nothing reaches the real root: writes land in a tmpfs mounted on
    `top` that vanishes with the namespace. Returns the packages' paths there."""
    run("mount", "--make-rprivate", "/")
    run("mount", "-t", "tmpfs", "tmpfs", top)
    upper, work, merged = (os.path.join(top, d) for d in ("upper", "work", "merged"))
    for d in (upper, work, merged):
        os.mkdir(d)
    run("mount", "-t", "overlay", "overlay", "-o", f"lowerdir=/,upperdir={upper},workdir={work}", merged)
    run("mount", "-t", "proc", "proc", os.path.join(merged, "proc"))
    run("mount", "--rbind", "/dev", os.path.join(merged, "dev"))
    # An empty /run: no running systemd, as in a container.
    run("mount", "-t", "tmpfs", "tmpfs", os.path.join(merged, "run"))
    inside = []
    for package in packages:
        shutil.copy(package, os.path.join(merged, "tmp", os.path.basename(package)))
        inside.append("/tmp/" + os.path.basename(package))
    os.chroot(merged)
    os.chdir("/")
    return inside


def observe_account_and_service(seen, topic):
    entry = pwd.getpwnam("magnetar")
    data = os.stat("/var/lib/magnetar")
    seen["account"] = {"uid": entry.pw_uid, "home": entry.pw_dir, "shell": entry.pw_shell,
                       "data_owner": data.st_uid, "data_mode": data.st_mode & 0o777}
    wants = "/etc/systemd/system/multi-user.target.wants/magnetar.service"
    seen["enabled"] = os.path.realpath(wants) if os.path.lexists(wants) else None
    node = ServiceRun("/")
    seen["ready"] = node.wait_notice("READY")
    with urllib.request.urlopen(f"http://127.0.0.1:{node.ports()['http']}/admin/v2/brokers/health",
                                timeout=10) as r:
        seen["health"] = r.read().decode().strip()
    node.cli("produce", topic, "-m", "hello from the package")
    seen["consumed"] = node.cli("consume", topic, "-s", "s", "-P", "Earliest", "-n", "1",
                                "--timeout", "10").stdout.strip()
    seen["stop"] = node.stop()[1]


def observe_deb_in_host_copy(top, deb):
    """dpkg -i as an admin does it, dependencies resolved against this
    machine's packages; the service's command; purge."""
    (deb,) = enter_host_copy(top, [deb])
    seen = {}
    r = run("dpkg", "-i", deb, check=False)
    seen["install"] = {"code": r.returncode, "output": r.stdout + r.stderr}
    if r.returncode == 0:
        seen["status"] = run("dpkg-query", "-W", "-f=${Status}", "magnetar").stdout
        seen["man"] = run("man", "-w", "magnetar", check=False).stdout.strip()
        observe_account_and_service(seen, "deb-host-copy")
        r = run("dpkg", "--purge", "magnetar", check=False)
        seen["purge"] = {"code": r.returncode, "output": r.stdout + r.stderr,
                         "account_left": run("getent", "passwd", "magnetar", check=False).returncode == 0,
                         "data_left": os.path.exists("/var/lib/magnetar"),
                         "config_left": os.path.exists("/etc/magnetar")}
    print(json.dumps(seen))


def observe_rpm_in_host_copy(top, rpm, rpm_next):
    """rpm -i with its scriptlets run for real (groupadd, useradd,
    systemctl preset offline); the service's command; an upgrade over an
    edited config; erase. Library requirements are not checked (--nodeps):
    this machine's libraries are Debian packages, unknown to rpm."""
    rpm, rpm_next = enter_host_copy(top, [rpm, rpm_next])
    seen = {}
    rpm_cmd = ("rpm", "--dbpath=/var/lib/rpm", "--nodeps")
    run("rpm", "--dbpath=/var/lib/rpm", "--initdb")
    r = run(*rpm_cmd, "-i", rpm, check=False)
    seen["install"] = {"code": r.returncode, "output": r.stdout + r.stderr}
    if r.returncode == 0:
        observe_account_and_service(seen, "rpm-host-copy")
        with open("/" + CONFIG, "a") as f:
            f.write("# edited by the admin\n")
        r = run(*rpm_cmd, "-U", rpm_next, check=False)
        with open("/" + CONFIG) as f:
            seen["upgrade"] = {"code": r.returncode, "output": r.stdout + r.stderr,
                               "edit_kept": f.read().endswith("# edited by the admin\n")}
        r = run(*rpm_cmd, "-e", "magnetar", check=False)
        wants = "/etc/systemd/system/multi-user.target.wants/magnetar.service"
        seen["erase"] = {"code": r.returncode, "output": r.stdout + r.stderr,
                         "binary_left": os.path.exists("/usr/bin/magnetar"),
                         "still_enabled": os.path.lexists(wants),
                         "account_left": run("getent", "passwd", "magnetar", check=False).returncode == 0,
                         "data_left": os.path.exists("/var/lib/magnetar/ports.json"),
                         "config_saved": os.path.exists("/" + CONFIG + ".rpmsave")}
    print(json.dumps(seen))


class HostCopyInstallTest(unittest.TestCase):
    """The packages installed by their own tools on a throwaway copy of this
    machine (see enter_host_copy): maintainer scripts and scriptlets on their
    ordinary path, with no running systemd."""

    def observe(self, *args):
        top = tempfile.mkdtemp(prefix="host-copy-", dir=WORK)
        r = run("unshare", "--mount", "/usr/bin/python3", __file__, "--observe-in-host-copy", top, *args,
                check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        seen = json.loads(r.stdout.splitlines()[-1])
        self.assertEqual(seen["install"]["code"], 0, seen["install"]["output"])
        return seen

    def check_account_and_service(self, seen):
        account_seen = seen["account"]
        self.assertLess(account_seen["uid"], 1000)
        self.assertEqual(account_seen["home"], "/var/lib/magnetar")
        self.assertIn(account_seen["shell"], ("/usr/sbin/nologin", "/sbin/nologin"))
        self.assertEqual((account_seen["data_owner"], account_seen["data_mode"]), (account_seen["uid"], 0o750))
        self.assertEqual(seen["enabled"], "/" + UNIT)
        self.assertEqual(seen["ready"]["READY"], "1")
        self.assertEqual(seen["health"], "ok")
        self.assertEqual(seen["consumed"], "hello from the package")
        self.assertEqual(seen["stop"], 0)

    def test_dpkg_i_then_purge(self):
        seen = self.observe("deb", DEB)
        self.assertEqual(seen["status"], "install ok installed")
        self.assertEqual(seen["man"], "/usr/share/man/man1/magnetar.1.gz")
        self.check_account_and_service(seen)
        self.assertEqual(seen["purge"]["code"], 0, seen["purge"]["output"])
        self.assertEqual({k: seen["purge"][k] for k in ("account_left", "data_left", "config_left")},
                         {"account_left": False, "data_left": False, "config_left": False})

    def test_rpm_install_upgrade_erase(self):
        seen = self.observe("rpm", RPM, RPM_NEXT)
        # systemctl preset, offline: Debian's preset policy enables services.
        self.check_account_and_service(seen)
        self.assertEqual(seen["upgrade"]["code"], 0, seen["upgrade"]["output"])
        self.assertTrue(seen["upgrade"]["edit_kept"])
        erase = seen["erase"]
        self.assertEqual(erase["code"], 0, erase["output"])
        self.assertEqual({k: erase[k] for k in ("binary_left", "still_enabled", "account_left", "data_left",
                                                 "config_saved")},
                         {"binary_left": False, "still_enabled": False, "account_left": True, "data_left": True,
                          "config_saved": True})


if __name__ == "__main__":
    import sys
    if sys.argv[1:2] == ["--observe-in-host-copy"]:
        top, kind, packages = sys.argv[2], sys.argv[3], sys.argv[4:]
        {"deb": observe_deb_in_host_copy, "rpm": observe_rpm_in_host_copy}[kind](top, *packages)
    else:
        unittest.main(verbosity=2)
