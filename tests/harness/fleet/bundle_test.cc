// The agent bundle for bare hosts (scripts/bundle-agent.sh, issue 47) on
// real bare hosts: minimal Debian 12 roots made by debootstrap (cached per
// machine), with nothing but the bundle unpacked into /opt/nimble-agent. An
// x86-64 agent runs chrooted into one, sandboxed as nimble-agent.service
// sandboxes it; an aarch64 one under qemu-aarch64 with the arm64 root as its
// library prefix. Both sit in network namespaces and reach a real
// coordinator over veth links, run real jobs into a real results.db and
// report the build's commit. The unit passes systemd-analyze verify.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "harness/bench/emulation.h"
#include "nimble/vm/error.h"
#include "tests/harness/fleet/fleet_fixture.h"
#include "tests/harness/fleet/fleet_processes.h"

namespace nimble::fleet_test {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kScript[] = NIMBLE_SOURCE_DIR "/scripts/bundle-agent.sh";
constexpr char kUnit[] = NIMBLE_SOURCE_DIR "/harness/agent/deploy/nimble-agent.service";
constexpr char kCloudInit[] = NIMBLE_SOURCE_DIR "/harness/agent/deploy/cloud-init.yaml";
// Made once per machine: a root takes debootstrap half a minute or more.
constexpr char kRootCache[] = "/var/cache/nimble/test-roots";
constexpr char kBundled[] = "/opt/nimble-agent/bin/nimble-bench";

// The Debian mirror apt uses here for bookworm (one-line or deb822 sources),
// which is the one debootstrap may reach; NIMBLE_DEBIAN_MIRROR overrides it.
std::string DebianMirror() {
  if (const char* mirror = std::getenv("NIMBLE_DEBIAN_MIRROR"); mirror && *mirror) return mirror;
  std::vector<fs::path> files = {"/etc/apt/sources.list"};
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator("/etc/apt/sources.list.d", ignored)) {
    files.push_back(entry.path());
  }
  const auto words = [](const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> all;
    for (std::string word; in >> word;) all.push_back(word);
    return all;
  };
  const auto has = [](const std::vector<std::string>& all, const std::string& word) {
    return std::find(all.begin(), all.end(), word) != all.end();
  };
  for (const fs::path& file : files) {
    std::istringstream text(ReadFile(file) + "\n");
    std::map<std::string, std::string> stanza;  // deb822: fields up to a blank line
    for (std::string line; std::getline(text, line);) {
      if (line.rfind("deb ", 0) == 0) {
        const std::vector<std::string> entry =
            words(std::regex_replace(line, std::regex(R"(\[[^\]]*\])"), ""));
        if (entry.size() > 2 && entry[2] == "bookworm") return entry[1];
      } else if (const size_t colon = line.find(':');
                 colon != std::string::npos && line[0] != '#' && line[0] != ' ') {
        stanza[line.substr(0, colon)] = line.substr(colon + 1);
      } else if (line.empty()) {
        const std::vector<std::string> uris = words(stanza["URIs"]);
        if (has(words(stanza["Types"]), "deb") && has(words(stanza["Suites"]), "bookworm") &&
            !uris.empty()) {
          return uris[0];
        }
        stanza.clear();
      }
    }
  }
  return "http://deb.debian.org/debian";
}

// A minimal Debian 12 root for `arch` (amd64; arm64 as debootstrap's first
// stage only: its packages unpacked, enough for qemu-aarch64 -L), made once
// per machine under kRootCache. Built in a hidden temporary directory and
// renamed into place, so a killed run leaves no half root (the next one
// removes its leftovers). Its path, or "" with the reason in `why_not`.
std::string CachedRoot(const std::string& arch, std::string* why_not) {
  const std::string name = "bookworm-" + arch + "-minbase" + (arch == "amd64" ? "" : "-stage1");
  const fs::path root = fs::path(kRootCache) / name;
  if (fs::exists(root)) return root;
  if (geteuid() != 0) {
    *why_not = "debootstrap needs root to make " + root.string() + "; this is uid " +
               std::to_string(geteuid());
    return "";
  }
  if (access("/usr/sbin/debootstrap", X_OK) != 0) {
    *why_not = "no /usr/sbin/debootstrap (bash scripts/install-deps.sh installs it)";
    return "";
  }
  std::error_code error;
  fs::create_directories(kRootCache, error);
  const int lock_fd = open((fs::path(kRootCache) / ".lock").c_str(), O_CREAT | O_RDWR, 0644);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX) != 0) {
    *why_not = "cannot lock " + std::string(kRootCache) + "/.lock";
    if (lock_fd >= 0) close(lock_fd);
    return "";
  }
  Fd lock(lock_fd);
  if (fs::exists(root)) return root;  // another run made it while we waited
  for (const auto& entry : fs::directory_iterator(kRootCache, error)) {
    if (entry.path().filename().string().rfind("." + name + ".", 0) == 0) {
      fs::remove_all(entry.path(), error);
    }
  }
  std::string building = (fs::path(kRootCache) / ("." + name + ".XXXXXX")).string();
  if (mkdtemp(building.data()) == nullptr) {
    *why_not = "mkdtemp in " + std::string(kRootCache) + " failed";
    return "";
  }
  std::vector<std::string> argv = {"unshare",     "--mount",           "--propagation", "private",
                                   "debootstrap", "--variant=minbase", "--arch=" + arch};
  if (arch != "amd64") argv.push_back("--foreign");
  argv.insert(argv.end(), {"bookworm", building, DebianMirror()});
  // Its own mount namespace: mounts it makes in the root die with it.
  const CliResult made = RunCommand(argv, 15min);
  if (made.exit_code != 0) {
    fs::remove_all(building, error);
    *why_not = "debootstrap of " + name + " from " + DebianMirror() + " failed (exit " +
               std::to_string(made.exit_code) + (made.timed_out ? ", timed out" : "") +
               "): " + Tail(made.out + made.err, 600);
    return "";
  }
  // mkdtemp made it 0700; a root's / is 0755.
  fs::permissions(building, fs::perms(0755), error);
  if (rename(building.c_str(), root.c_str()) != 0) fs::remove_all(building, error);
  std::cerr << "[ bundle  ] debootstrap made " << root.string() << " in " << made.seconds << " s\n";
  return root;
}

// What `nimble-bench probe` of `argv` says (the host JSON), or null.
Json Probe(const std::vector<std::string>& argv) {
  const CliResult probe = RunCommand(Concat(argv, {"probe"}), 60s);
  if (probe.exit_code != 0) return nullptr;
  try {
    return Json::parse(probe.out);
  } catch (const Json::exception&) {
    return nullptr;
  }
}

// A bundle made by the script from a build, and the commit its build reports.
struct Bundle {
  std::string tarball;
  std::string build_commit;  // `probe` of the build's own nimble-bench
  std::string manifest;      // nimble-agent/BUNDLE
  std::string error;         // the script failed
  std::string skip;          // no such build here
};

Bundle MakeBundle(const std::string& arch, const std::string& build_dir,
                  const std::vector<std::string>& runner, const std::string& out_dir) {
  Bundle bundle;
  const CliResult made = RunCommand(
      {"bash", kScript, "--arch", arch, "--build-dir", build_dir, "--out", out_dir}, 5min);
  if (made.exit_code != 0) {
    bundle.error = "bundle-agent.sh --arch " + arch + " failed (exit " +
                   std::to_string(made.exit_code) + "): " + Tail(made.out + made.err, 1500);
    return bundle;
  }
  std::cerr << "[ bundle  ] " << made.out;
  bundle.tarball = made.out.substr(0, made.out.find(' '));
  const CliResult manifest =
      RunCommand({"tar", "-xzOf", bundle.tarball, "nimble-agent/BUNDLE"}, 60s);
  bundle.manifest = manifest.out;
  const Json host = Probe(Concat(runner, {build_dir + "/harness/cli/nimble-bench"}));
  bundle.build_commit = host.is_object() ? host.value("commit", "") : "";
  return bundle;
}

// A line "KEY: VALUE" of a BUNDLE file.
std::string ManifestField(const std::string& manifest, const std::string& key) {
  std::istringstream in(manifest);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ": ", 0) == 0) return line.substr(key.size() + 2);
  }
  return "";
}

// Mounts an overlay of `lower` (colon-separated, topmost first) at ROOT in a
// mount namespace of its own (gone with the process), then runs the rest.
// The x86 variant also chroots into ROOT, sandboxed as nimble-agent.service
// is: a read-only system but the state and cache directories, private /tmp,
// no /root or /home, umask 077, no capabilities, no new privileges, the
// unit's environment and nothing of ours. HIDE, when given, is a file of the
// root hidden behind /dev/null.
constexpr char kOverlay[] = R"(set -eu
root=$1 lower=$2 upper=$3 work=$4 hide=$5
shift 5
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$root"
)";
constexpr char kSandbox[] = R"(mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
for dir in var/lib/nimble-agent var/cache/nimble-agent; do
  mkdir -p "$root/$dir"
  mount --bind "$root/$dir" "$root/$dir"
done
[ -z "$hide" ] || mount --bind /dev/null "$root$hide"
mount -o remount,bind,ro "$root"
for dir in tmp var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$root/$dir"; done
for dir in root home; do mount -t tmpfs -o mode=000 tmpfs "$root/$dir"; done
exec chroot "$root" /bin/sh -c 'umask 077; cd /var/lib/nimble-agent; exec "$@"' sh \
  /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/nimble-agent \
  XDG_CACHE_HOME=/var/cache/nimble-agent \
  /usr/bin/setpriv --no-new-privs --bounding-set=-all --inh-caps=-all "$@"
)";
constexpr char kEmulated[] =
    R"(exec env -i PATH=/usr/bin:/bin NIMBLE_EMULATOR=qemu-aarch64 QEMU_LD_PREFIX="$root" "$@"
)";

class BundleTest : public FleetFixture {
 protected:
  BundleTest() : FleetFixture("bundle") {}

  static void SetUpTestSuite() {
    bundles_ = new TempDir("nimble-bundles");
    x86_ = new Bundle(MakeBundle("x86_64", NIMBLE_BUILD_ROOT, {}, bundles_->path()));
    arm_ = new Bundle();
    try {
      const bench::Emulator emulator = bench::FindArmEmulator();
      qemu_ = new std::string(emulator.qemu);
      const std::string build =
          fs::path(emulator.arm_nimble_bench).parent_path().parent_path().parent_path();
      *arm_ = MakeBundle("aarch64", build, {emulator.qemu}, bundles_->path());
    } catch (const nimble::Error& missing) {
      arm_->skip = missing.what();
    }
  }

  static void TearDownTestSuite() {
    delete x86_;
    delete arm_;
    delete qemu_;
    delete bundles_;
    x86_ = arm_ = nullptr;
    qemu_ = nullptr;
    bundles_ = nullptr;
  }

  // The bundle's layer: the tarball unpacked into opt/, the fleet's secret
  // (and a wrong one) in etc/nimble-agent/, as cloud-init.yaml leaves them.
  std::string BundleLayer(const Bundle& bundle) {
    const std::string layer = *dir_ / "bundle-layer";
    fs::create_directories(layer + "/opt");
    fs::create_directories(layer + "/etc/nimble-agent");
    const CliResult unpacked =
        RunCommand({"tar", "-xzf", bundle.tarball, "-C", layer + "/opt"}, 2min);
    EXPECT_EQ(unpacked.exit_code, 0) << unpacked.err;
    WriteFile(layer + "/etc/nimble-agent/secret", secret_ + "\n", 0600);
    WriteFile(layer + "/etc/nimble-agent/wrong-secret", "not-the-secret\n", 0600);
    return layer;
  }

  // Where the next overlay goes: each gets its own upper layer, so that the
  // cached root is never written.
  std::string NextOverlay() {
    const std::string run = *dir_ / ("run" + std::to_string(++runs_));
    for (const char* part : {"/upper", "/work", "/root"}) fs::create_directories(run + part);
    return run;
  }

  // argv that runs `command` inside the namespace on an overlay (at
  // OVERLAY/root) of the bundle layer over `root`: sandboxed and chrooted
  // into it (x86), or else emulated with it as qemu's prefix.
  std::vector<std::string> OnBareHost(const std::string& overlay, const std::string& root,
                                      const std::string& layer, bool chroot,
                                      const std::vector<std::string>& command,
                                      const std::string& hide = "") {
    const std::string script = std::string(kOverlay) + (chroot ? kSandbox : kEmulated);
    return netns_->Inside(
        Concat({"unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                overlay + "/root", layer + ":" + root, overlay + "/upper", overlay + "/work", hide},
               command));
  }

  static TempDir* bundles_;
  static Bundle* x86_;
  static Bundle* arm_;
  static std::string* qemu_;

  int runs_ = 0;
};

TempDir* BundleTest::bundles_ = nullptr;
Bundle* BundleTest::x86_ = nullptr;
Bundle* BundleTest::arm_ = nullptr;
std::string* BundleTest::qemu_ = nullptr;

// The x86-64 bundle's manifest, name and programs: what BUNDLE says is in it.
TEST_F(BundleTest, TheX86BundleSaysWhatItHolds) {
  ASSERT_EQ(x86_->error, "");
  ASSERT_NE(x86_->build_commit, "");
  const std::string& manifest = x86_->manifest;
  EXPECT_EQ(ManifestField(manifest, "commit"), x86_->build_commit);
  EXPECT_EQ(ManifestField(manifest, "arch"), "x86_64");
  EXPECT_EQ(fs::path(x86_->tarball).filename(),
            "nimble-agent-" + x86_->build_commit + "-x86_64.tar.gz");
  EXPECT_EQ(ManifestField(manifest, "programs"), "bin/ld.lld bin/nimble-bench");
  // glibc comes from the host, and everything else from the bundle.
  EXPECT_THAT(ManifestField(manifest, "from the host"), HasSubstr("libc.so.6"));
  EXPECT_THAT(ManifestField(manifest, "from the host"), Not(HasSubstr("libstdc++")));
  for (const char* library : {"lib/libLLVM.so.19.1 ", "lib/libstdc++.so.6 ", "lib/libgcc_s.so.1 ",
                              "lib/libopenblas.so.0 ", "lib/libzip.so.4 ", "lib/libssl.so.3 "}) {
    EXPECT_THAT(manifest, HasSubstr(library));
  }
  EXPECT_THAT(manifest, Not(HasSubstr("lib/libc.so.6")));
  const CliResult listing = RunCommand({"tar", "-tzf", x86_->tarball}, 60s);
  for (const char* file : {"nimble-agent/README.txt", "nimble-agent/nimble-agent.service",
                           "nimble-agent/cloud-init.yaml", "nimble-agent/BUNDLE"}) {
    EXPECT_THAT(listing.out, HasSubstr(std::string(file) + "\n"));
  }
}

// On a bare Debian 12 (debootstrap's minbase, nothing installed), the
// bundle's agent, chrooted and sandboxed as its unit runs it, joins a
// coordinator on another host over the veth link, runs real jobs (kernels
// compiled and linked by the bundle's ld.lld) into results.db with its
// host's description and the build's commit; a wrong secret ends it with
// exit status 1 (which its unit does not restart).
TEST_F(BundleTest, X86AgentOnABareDebianRunsJobs) {
  ASSERT_EQ(x86_->error, "");
  UseNetNamespace("network namespaces and mounts need root");
  if (IsSkipped() || HasFatalFailure()) return;
  std::string why_not;
  const std::string root = CachedRoot("amd64", &why_not);
  if (root.empty()) GTEST_SKIP() << why_not;
  // The bare host lacks what the bundle brings.
  for (const char* file :
       {"/usr/bin/ld.lld-19", "/usr/lib/x86_64-linux-gnu/libzip.so.4",
        "/usr/lib/x86_64-linux-gnu/libLLVM.so.19.1", "/usr/lib/x86_64-linux-gnu/libssl.so.3"}) {
    ASSERT_FALSE(fs::exists(root + file)) << root << file;
  }
  const std::string layer = BundleLayer(*x86_);
  // On our end of the veth link, not loopback.
  ASSERT_GT(StartCoordinator(netns_->host_address() + ":0"), 0);

  Process& agent = Start("bare-x86", OnBareHost(NextOverlay(), root, layer, /*chroot=*/true,
                                                {kBundled, "agent", "--coordinator", address_,
                                                 "--secret-file", "/etc/nimble-agent/secret",
                                                 "--name", "bare-x86", "--give-up", "30"}));
  const std::vector<int64_t> runs = Submit(Concat(kTinyRun, {"--target", "intel", "--count", "2"}));
  const std::vector<int64_t> probe = Submit({"--kind", "probe"});
  ASSERT_EQ(runs.size(), 2u);
  ASSERT_EQ(probe.size(), 1u);
  ASSERT_TRUE(AgentConnects("bare-x86", 30s)) << agent.Log();
  ASSERT_TRUE(JobsFinish(Concat(runs, probe), 120s));

  EXPECT_THAT(coordinator_->Log(),
              HasSubstr("agent bare-x86 joined from " + netns_->inner_address() + ":"));
  const Json host = Probe({NIMBLE_BENCH_BINARY});
  ASSERT_TRUE(host.is_object());
  EXPECT_EQ(db_->Rows("SELECT host, arch, emulated, cpu_model, cores, commit_id FROM agents "
                      "WHERE name = 'bare-x86'"),
            (Rows{{host.value("host", ""), "x86_64", "0", host.value("cpu_model", ""),
                   std::to_string(host.value("cores", 0)), x86_->build_commit}}));
  for (const int64_t id : runs) {
    EXPECT_EQ(db_->Rows("SELECT j.state, r.agent, r.arch, r.emulated, r.target, r.status, "
                        "r.host, r.commit_id FROM jobs j JOIN runs r ON r.id = j.run_id WHERE "
                        "j.id = " +
                        std::to_string(id)),
              (Rows{{"done", "bare-x86", "x86_64", "0", "intel", "done", host.value("host", ""),
                     x86_->build_commit}}))
        << "job " << id << ": "
        << db_->Scalar("SELECT error FROM jobs WHERE id = " + std::to_string(id));
  }
  // The probe job: the bare host's own description, with no peers.
  const std::string probed =
      db_->Scalar("SELECT result FROM jobs WHERE id = " + std::to_string(probe[0]));
  ASSERT_NE(probed, "");
  const Json bare = Json::parse(probed).at("host");
  EXPECT_EQ(bare["commit"], x86_->build_commit);
  EXPECT_EQ(bare["arch"], "x86_64");
  EXPECT_EQ(bare["peers"], Json::array());
  agent.Kill();

  // Kernels are linked by the bundle's ld.lld: without it, the run fails
  // naming every place it looked.
  const CliResult unlinked = RunCommand(
      OnBareHost(NextOverlay(), root, layer, true,
                 {kBundled, "run", "--model", "lstm", "--hidden-size", "16", "--sentences", "1",
                  "--warmup", "0", "--repeat", "1", "--target", "intel", "--record-json"},
                 "/opt/nimble-agent/bin/ld.lld"),
      120s);
  EXPECT_NE(unlinked.exit_code, 0);
  EXPECT_THAT(unlinked.err,
              HasSubstr("ld.lld-19 not found (looked at /opt/nimble-agent/bin/ld.lld, "
                        "/usr/bin/ld.lld-19, /usr/lib/llvm-19/bin/ld.lld"));

  // A wrong secret: exit status 1, the one nimble-agent.service does not restart.
  const CliResult refused = RunCommand(
      OnBareHost(NextOverlay(), root, layer, true,
                 {kBundled, "agent", "--coordinator", address_, "--secret-file",
                  "/etc/nimble-agent/wrong-secret", "--name", "wrong", "--give-up", "30"}),
      60s);
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("exiting"));
}

// The aarch64 bundle on a bare arm64 Debian (debootstrap's first stage:
// glibc and friends unpacked), run by qemu-aarch64 with that root as its
// prefix: it runs an emulated job into results.db with the build's commit,
// and loads no library from this host's arm64 multiarch directories (a
// bare host has none).
TEST_F(BundleTest, Aarch64AgentUnderQemuRunsAJob) {
  if (!arm_->skip.empty()) GTEST_SKIP() << arm_->skip;
  ASSERT_EQ(arm_->error, "");
  ASSERT_NE(arm_->build_commit, "");
  EXPECT_EQ(ManifestField(arm_->manifest, "commit"), arm_->build_commit);
  EXPECT_EQ(ManifestField(arm_->manifest, "arch"), "aarch64");
  // The cross build generates no code (no LLVM): no linker to ship.
  EXPECT_EQ(ManifestField(arm_->manifest, "programs"), "bin/nimble-bench");
  UseNetNamespace("network namespaces and mounts need root");
  if (IsSkipped() || HasFatalFailure()) return;
  std::string why_not;
  const std::string root = CachedRoot("arm64", &why_not);
  if (root.empty()) GTEST_SKIP() << why_not;
  ASSERT_TRUE(fs::exists(root + "/lib/ld-linux-aarch64.so.1"));
  ASSERT_FALSE(fs::exists(root + "/usr/lib/aarch64-linux-gnu/libzip.so.4"));
  const std::string layer = BundleLayer(*arm_);
  // On our end of the veth link, not loopback.
  ASSERT_GT(StartCoordinator(netns_->host_address() + ":0"), 0);

  const std::string overlay = NextOverlay();
  const std::string merged = overlay + "/root";
  Process& agent = Start(
      "bare-arm", OnBareHost(overlay, root, layer, /*chroot=*/false,
                             {*qemu_, "-L", merged, merged + kBundled, "agent", "--coordinator",
                              address_, "--secret-file", merged + "/etc/nimble-agent/secret",
                              "--name", "bare-arm", "--give-up", "30"}));
  const std::vector<int64_t> ids = Submit(Concat(kTinyRun, {"--target", "arm", "--emulate"}));
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(AgentConnects("bare-arm", 60s)) << agent.Log();

  // Every library it mapped: the bundle's, or glibc from the bare root.
  std::vector<std::string> libraries;
  std::istringstream maps(ReadFile("/proc/" + std::to_string(agent.pid()) + "/maps"));
  for (std::string line; std::getline(maps, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos || line.find(".so") == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (std::find(libraries.begin(), libraries.end(), path) == libraries.end()) {
      libraries.push_back(path);
    }
  }
  EXPECT_THAT(libraries, Contains(merged + "/opt/nimble-agent/lib/libstdc++.so.6"));
  EXPECT_THAT(libraries, Contains(AllOf(HasSubstr(merged), HasSubstr("libc.so.6"))));
  for (const std::string& path : libraries) {
    EXPECT_EQ(path.rfind("/usr/lib/aarch64-linux-gnu/", 0), std::string::npos) << path;
    EXPECT_EQ(path.rfind("/lib/aarch64-linux-gnu/", 0), std::string::npos) << path;
  }

  ASSERT_TRUE(JobsFinish(ids, 150s));
  EXPECT_EQ(db_->Rows("SELECT arch, emulated, emulator, commit_id FROM agents WHERE name = "
                      "'bare-arm'"),
            (Rows{{"aarch64", "1", "qemu-aarch64", arm_->build_commit}}));
  EXPECT_EQ(db_->Rows("SELECT j.state, r.agent, r.arch, r.emulated, r.target, r.status, "
                      "r.commit_id FROM jobs j JOIN runs r ON r.id = j.run_id WHERE j.id = " +
                      std::to_string(ids[0])),
            (Rows{{"done", "bare-arm", "aarch64", "1", "arm", "done", arm_->build_commit}}))
      << db_->Scalar("SELECT error FROM jobs WHERE id = " + std::to_string(ids[0]));
}

// systemd accepts the unit as it stands (its ExecStart pointed at a real
// binary, which verify insists on), its options are the agent's, and a
// wrong secret's exit status is the one it does not restart.
TEST_F(BundleTest, TheUnitPassesSystemdAnalyzeVerify) {
  if (access("/usr/bin/systemd-analyze", X_OK) != 0) {
    GTEST_SKIP() << "no /usr/bin/systemd-analyze (Debian package systemd)";
  }
  ASSERT_EQ(x86_->error, "");
  // Its logical lines: a backslash at the end of a line continues it.
  const std::string raw = ReadFile(kUnit);
  const std::string unit_text = std::regex_replace(raw, std::regex("\\\\\n *"), "");
  ASSERT_THAT(unit_text, HasSubstr(std::string("ExecStart=") + kBundled + " agent "));
  const std::string binary = *dir_ / "opt/nimble-agent/bin/nimble-bench";
  fs::create_directories(fs::path(binary).parent_path());
  const CliResult unpacked = RunCommand(
      {"tar", "-xzf", x86_->tarball, "-C", *dir_ / "opt", "nimble-agent/bin/nimble-bench"}, 60s);
  ASSERT_EQ(unpacked.exit_code, 0) << unpacked.err;
  const std::string unit = *dir_ / "nimble-agent.service";
  std::string pointed = raw;
  for (size_t at = pointed.find(kBundled); at != std::string::npos;
       at = pointed.find(kBundled, at + binary.size())) {
    pointed.replace(at, std::string(kBundled).size(), binary);
  }
  WriteFile(unit, pointed);
  const CliResult verify = RunCommand({"systemd-analyze", "verify", unit}, 60s);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  // Unknown keys and bad values are only warnings: none at all.
  EXPECT_EQ(verify.out + verify.err, "");

  const std::string help = RunCommand({binary, "agent", "--help"}, 30s).out;
  std::smatch exec;
  ASSERT_TRUE(std::regex_search(unit_text, exec, std::regex("ExecStart=([^\n]*)")));
  const std::string line = exec[1];
  const std::regex option("--[a-z-]+");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), option);
       it != std::sregex_iterator(); ++it) {
    EXPECT_THAT(help, HasSubstr(it->str() + " ")) << "the agent has no " << it->str();
  }
  EXPECT_THAT(unit_text, HasSubstr("--secret-file /etc/nimble-agent/secret"));
  EXPECT_THAT(unit_text, HasSubstr("EnvironmentFile=/etc/nimble-agent/agent.env"));
  EXPECT_THAT(unit_text, HasSubstr("\nRestartPreventExitStatus=1\n"));
}

// The cloud-init example is #cloud-config YAML that writes the secret 0600
// and agent.env, and runs an installer that is valid sh.
TEST_F(BundleTest, TheCloudInitExampleIsValidUserData) {
  const std::string text = ReadFile(kCloudInit);
  ASSERT_EQ(text.rfind("#cloud-config\n", 0), 0u);
  const std::string parse = *dir_ / "parse.py";
  WriteFile(parse,
            "import json, sys, yaml\n"
            "print(json.dumps(yaml.safe_load(open(sys.argv[1]))))\n");
  const CliResult parsed = RunCommand({"python3", parse, kCloudInit}, 60s);
  if (parsed.exit_code != 0 && parsed.err.find("No module named 'yaml'") != std::string::npos) {
    GTEST_SKIP() << "python3 has no yaml (Debian package python3-yaml)";
  }
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  const Json config = Json::parse(parsed.out);
  std::map<std::string, Json> files;
  for (const Json& file : config.at("write_files")) files[file.at("path")] = file;
  ASSERT_EQ(files.count("/etc/nimble-agent/secret"), 1u);
  EXPECT_EQ(files["/etc/nimble-agent/secret"]["permissions"], "0600");
  EXPECT_THAT(files["/etc/nimble-agent/agent.env"]["content"].get<std::string>(),
              HasSubstr("\nNIMBLE_COORDINATOR="));
  const Json installer = files["/usr/local/sbin/nimble-agent-install"];
  ASSERT_TRUE(installer.is_object());
  const std::string script = installer["content"];
  EXPECT_THAT(script, HasSubstr("BUNDLE_URL="));
  EXPECT_THAT(script, HasSubstr("/etc/systemd/system/nimble-agent.service"));
  WriteFile(*dir_ / "install.sh", script);
  const CliResult syntax = RunCommand({"sh", "-n", *dir_ / "install.sh"}, 30s);
  EXPECT_EQ(syntax.exit_code, 0) << syntax.err;
  EXPECT_EQ(config.at("runcmd"), Json::parse(R"([["/usr/local/sbin/nimble-agent-install"]])"));
}

}  // namespace
}  // namespace nimble::fleet_test
