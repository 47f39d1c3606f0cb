"""The Helm chart, its seccomp profile and the Containerfile, checked offline: `python chart.py
BINARY` (with the tools of deploy/requirements.txt). Helm itself lints and renders the chart
(default values, and every option on) and refuses what it must (more than one replica without a
shared spent-checkpoint claim); every rendered object is validated against the Kubernetes API
schema of the oldest and newest versions the chart supports, unknown fields refused; then what
the objects say is held against the gateway they run: each flag is one `code-runtime mcp` takes,
the probes, ports, secret, config and spent-checkpoint paths agree, the grace period covers the
longest run, the memory limit the runs' budgets. The seccomp profile the pods name is read from
deploy/seccomp/, checked to be an allowlist that refuses what it must, and compiled with the
system's libseccomp as container runtimes compile it; the gateway, started under it with the
chart's arguments and rendered config, serves, runs a TypeScript and a Python program in their
cells, answers the probes and exposes the metric the autoscaler reads, then drains on SIGTERM.
Exits non-zero on the first failed check. Run by code-runtime-cli/tests/it/deploy.rs."""

import atexit
import ctypes
import errno
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import kubernetes_validate
import yaml

BINARY = os.path.abspath(sys.argv[1])
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(ROOT, "deploy", "helm", "code-runtime")
CONTAINERFILE = os.path.join(ROOT, "Containerfile")
SECCOMP_DIR = os.path.join(ROOT, "deploy", "seccomp")
HELM = os.path.join(os.path.dirname(sys.executable), "helm")
# The oldest Kubernetes the chart is for (the container's appArmorProfile field is 1.30's), and
# the newest schema the validator has.
VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
EVERY_OPTION = [
    "--set", "autoscaling.enabled=true", "--set", "spentCheckpoints.existingClaim=spent",
    "--set", "envFromSecrets[0].name=GITHUB_TOKEN", "--set", "envFromSecrets[0].secret=github-mcp",
    "--set", "envFromSecrets[0].key=token",
    "--set", "appArmorProfile.type=Localhost", "--set", "appArmorProfile.localhostProfile=code-runtime",
]
# What the container's profile must refuse (by not listing them): kernel attack surface nothing
# of the gateway, python3, V8 or a cell's setup uses (io_uring, whose operations seccomp never
# sees; eBPF; keys; userfaultfd, which exploits use to stall the kernel mid-copy), reaching into
# other processes, the node's clock and I/O ports, kernel modules, and the namespace and mount
# calls a cell does not make (it clones into its namespaces, never enters one, and mounts with
# the classic and detached-tree calls only).
REFUSED = [
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "bpf", "perf_event_open",
    "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "open_by_handle_at", "name_to_handle_at", "ptrace", "process_vm_readv",
    "process_vm_writev", "kcmp", "pidfd_getfd", "swapon", "swapoff", "reboot", "lookup_dcookie", "acct",
    "quotactl", "vm86", "vm86old", "iopl", "ioperm", "syslog", "unshare", "setns", "chroot", "fsopen",
    "fsconfig", "fsmount", "fspick", "memfd_secret", "fanotify_init", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "setdomainname", "vhangup",
]
# What it must allow: what a cell's init does in its new namespaces (code-runtime-sandbox's
# child.rs, mounts.rs, landlock.rs, seccomp.rs, cell.rs; the Python zygote's zygote.py).
NEEDED = [
    "clone", "clone3", "mount", "umount2", "pivot_root", "open_tree", "move_mount", "mount_setattr",
    "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp", "prctl",
    "prlimit64", "setgroups", "setresuid", "setresgid", "capset", "sethostname", "memfd_create",
    "execveat", "close_range", "pidfd_open", "pidfd_send_signal", "mincore",
]
PROTOCOL = "2025-06-18"


def check(condition, what, seen=None):
    if not condition:
        sys.exit("FAILED: %s%s" % (what, "" if seen is None else "\n  seen: %r" % (seen,)))
    print("ok:", what)


def helm(*args):
    done = subprocess.run([HELM, *args], capture_output=True, text=True)
    check(done.returncode == 0, "helm %s" % " ".join(args[:2]), done.stderr + done.stdout)
    return done.stdout


def rendered(*options):
    objects = [doc for doc in yaml.safe_load_all(helm("template", "r", CHART, *options)) if doc]
    return {obj["kind"]: obj for obj in objects}, objects


def values():
    with open(os.path.join(CHART, "values.yaml")) as file:
        return yaml.safe_load(file)


def mcp_flags():
    """The long options `code-runtime mcp` takes, from its --help."""
    done = subprocess.run([BINARY, "mcp", "--help"], capture_output=True, text=True)
    check(done.returncode == 0, "code-runtime mcp --help", done.stderr)
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", done.stdout))


def containerfile():
    """USER, EXPOSE, ENV and the command (ENTRYPOINT + CMD) of the final stage."""
    with open(CONTAINERFILE) as file:
        text = re.sub(r"\\\n", " ", file.read())
    final = text.rsplit("\nFROM ", 1)[1]
    found = {}
    for line in final.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word in ("USER", "EXPOSE", "ENTRYPOINT", "CMD"):
            found[word] = rest.strip()
        elif word == "ENV":
            name, _, value = rest.partition("=")
            found.setdefault("ENV", {})[name.strip()] = value.strip()
    found["command"] = json.loads(found["ENTRYPOINT"]) + json.loads(found["CMD"])
    return found


def flags_of(args):
    """`args` as {flag: value} (a flag without a value maps to None)."""
    parsed, index = {}, 0
    while index < len(args):
        if args[index].startswith("--"):
            value = args[index + 1] if index + 1 < len(args) and not args[index + 1].startswith("--") else None
            parsed[args[index]] = value
            index += 2 if value is not None else 1
        else:
            index += 1
    return parsed


class Libseccomp:
    """The system's libseccomp, with which container runtimes (runc, crun) compile a profile: the
    default action, the architectures, then an allow rule per system call the machine's
    architecture names (a name it does not know is skipped, as runc skips it). runc also answers
    ENOSYS for calls newer than the newest the profile names; here they fail with EPERM."""

    ALLOW, ERRNO = 0x7FFF0000, 0x00050000

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
        except OSError as error:
            check(False, "the system has libseccomp (apt-get install libseccomp2)", str(error))
        self.lib.seccomp_init.restype = ctypes.c_void_p
        self.lib.seccomp_init.argtypes = [ctypes.c_uint32]
        self.lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
        self.lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
        self.lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        self.lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        self.lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
        self.lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
        self.lib.seccomp_load.argtypes = [ctypes.c_void_p]

    def arch(self, name):
        return self.lib.seccomp_arch_resolve_name(name[len("SCMP_ARCH_"):].lower().encode())

    def number(self, name, arch=None):
        """The call's number on `arch` (the machine's by default), negative where it has none."""
        if arch is None:
            return self.lib.seccomp_syscall_resolve_name(name.encode())
        return self.lib.seccomp_syscall_resolve_name_arch(arch, name.encode())

    def compile(self, profile):
        """A function that installs `profile` in the calling process (for `preexec_fn`)."""
        context = self.lib.seccomp_init(self.ERRNO | profile.get("defaultErrnoRet", errno.EPERM))
        for arch in profile["architectures"]:
            added = self.lib.seccomp_arch_add(context, self.arch(arch))
            if added not in (0, -errno.EEXIST):
                check(False, "libseccomp adds architecture %s" % arch, added)
        for name in sorted(allowed(profile)):
            number = self.number(name)
            if number >= 0 and self.lib.seccomp_rule_add(context, self.ALLOW, number, 0) != 0:
                check(False, "libseccomp allows %s" % name)

        def install():
            if self.lib.seccomp_load(ctypes.c_void_p(context)) != 0:
                os._exit(125)

        return install


def allowed(profile):
    return {name for rule in profile["syscalls"] for name in rule["names"]}


def mebibytes(quantity):
    check(quantity.endswith("Mi"), "memory is given in Mi", quantity)
    return int(quantity[:-2])


def validates(objects, label):
    for version in VERSIONS:
        for obj in objects:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                check(False, "%s %s validates against Kubernetes %s" % (label, obj["kind"], version), str(error))
    # The validator is not a check that cannot fail: a field Kubernetes does not have is refused.
    deployment = json.loads(json.dumps(next(obj for obj in objects if obj["kind"] == "Deployment")))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["paht"] = "/livez"
    try:
        kubernetes_validate.validate(deployment, VERSIONS[0], strict=True)
        check(False, "the validator refuses a misspelt field", deployment)
    except kubernetes_validate.ValidationError:
        pass
    kinds = sorted(obj["kind"] for obj in objects)
    check(True, "%s: %s validate against Kubernetes %s, unknown fields refused" % (label, ", ".join(kinds), " and ".join(VERSIONS)))


def agrees(kinds, defaults, flags):
    deployment, service, pdb = kinds["Deployment"], kinds["Service"], kinds["PodDisruptionBudget"]
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    args = container["args"]
    check(args[0] == "mcp" and all(arg in flags for arg in args if arg.startswith("--")),
          "every flag the chart gives is one `code-runtime mcp` takes", [arg for arg in args if arg.startswith("--")])
    given = flags_of(args)
    port = container["ports"][0]
    check(given["--http"] == "0.0.0.0:%d" % port["containerPort"] and port["name"] == "http"
          and service["spec"]["ports"][0]["targetPort"] == "http",
          "the gateway listens on the container's port, which the Service targets", (given["--http"], port))
    labels = pod["metadata"]["labels"]
    check(all(labels.get(key) == value for key, value in service["spec"]["selector"].items())
          and pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
          and all(labels.get(key) == value for key, value in deployment["spec"]["selector"]["matchLabels"].items()),
          "the Service, the PodDisruptionBudget and the Deployment select the same pods", labels)
    probes = {name: container[name]["httpGet"] for name in ("readinessProbe", "livenessProbe", "startupProbe")}
    check(probes["readinessProbe"]["path"] == "/healthz" and probes["livenessProbe"]["path"] == "/livez"
          and all(probe["port"] == "http" for probe in probes.values()),
          "readiness on /healthz (503 while draining), liveness on /livez (a drain is not a failure)", probes)
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    config_path = given["--config"]
    check(os.path.dirname(config_path) == mounts["config"]
          and volumes["config"]["configMap"]["name"] == kinds["ConfigMap"]["metadata"]["name"]
          and os.path.basename(config_path) in kinds["ConfigMap"]["data"],
          "--config names the ConfigMap's servers.json where it is mounted", config_path)
    check(given["--spent-checkpoints"].startswith(mounts["spent"] + "/") and volumes["spent"] == {"name": "spent", "emptyDir": {}}
          and "--checkpoint-key" in given and deployment["spec"]["strategy"] == {"type": "Recreate"}
          and deployment["spec"]["replicas"] == 1,
          "one pod by default: --spent-checkpoints (which --checkpoint-key needs) in its own emptyDir, and an"
          " update stops it before starting the next (Recreate)", (given.get("--spent-checkpoints"), deployment["spec"]["strategy"]))
    projected = {item["path"]: source["secret"]["name"]
                 for source in volumes["secrets"]["projected"]["sources"] for item in source["secret"]["items"]}
    for flag, secret in (("--auth-token-file", defaults["auth"]), ("--checkpoint-key", defaults["checkpointKey"])):
        path = given[flag]
        check(os.path.dirname(path) == mounts["secrets"] and projected.get(os.path.basename(path)) == secret["existingSecret"],
              "%s reads secret %s where it is mounted" % (flag, secret["existingSecret"]), (path, projected))
    cache = next(env["value"] for env in container["env"] if env["name"] == "XDG_CACHE_HOME")
    check(cache == mounts["cache"], "the cache directory is a writable volume (the root file system is read-only)", cache)
    limits = defaults["config"]["limits"]
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    longest = -(-limits["timeoutMs"] // 1000)
    check(grace >= longest + defaults["preStopSeconds"],
          "the grace period (%d s) covers the wait before SIGTERM and the longest run (%d s)" % (grace, longest))
    memory = mebibytes(container["resources"]["limits"]["memory"])
    runs = int(given["--max-concurrent-runs"])
    check(runs == defaults["maxConcurrentRuns"] and memory >= runs * limits["memoryMb"],
          "the memory limit (%d Mi) holds %d runs at their budget of %d MB" % (memory, runs, limits["memoryMb"]))
    security = pod["spec"]["securityContext"]
    check(security["runAsNonRoot"] and security["runAsUser"] != 0
          and container["securityContext"]["capabilities"]["drop"] == ["ALL"]
          and container["securityContext"]["readOnlyRootFilesystem"],
          "not root, no capability, a read-only root file system", (security, container["securityContext"]))
    check(pod["spec"]["hostUsers"] is False and container["securityContext"]["procMount"] == "Unmasked"
          and container["securityContext"]["appArmorProfile"] == {"type": "Unconfined"},
          "user namespaces of the pod's own with an unmasked /proc (a cell mounts its own), AppArmor's default"
          " (which denies mount) off")
    return container, security


def with_every_option(kinds):
    hpa, deployment = kinds["HorizontalPodAutoscaler"], kinds["Deployment"]
    check(hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
          and "replicas" not in deployment["spec"],
          "the autoscaler scales the Deployment, which then leaves the replica count to it")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    given = flags_of(container["args"])
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    claim = next(volume for volume in deployment["spec"]["template"]["spec"]["volumes"] if volume["name"] == "spent")
    check(given["--spent-checkpoints"].startswith(mounts["spent"] + "/")
          and claim["persistentVolumeClaim"]["claimName"] == "spent"
          and deployment["spec"]["strategy"]["type"] == "RollingUpdate",
          "with a claim, --spent-checkpoints is on it, shared by every replica, and updates roll", given["--spent-checkpoints"])
    secret = next(env for env in container["env"] if env["name"] == "GITHUB_TOKEN")
    check(secret == {"name": "GITHUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "github-mcp", "key": "token"}}},
          "envFromSecrets becomes a variable from the Secret's key (for ${GITHUB_TOKEN} in the config)", secret)
    check(container["securityContext"]["appArmorProfile"] == {"type": "Localhost", "localhostProfile": "code-runtime"},
          "a Localhost AppArmor profile is taken", container["securityContext"])
    return hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]


def refused_renders():
    for options, what in ((["--set", "replicaCount=2"], "replicaCount 2"), (["--set", "autoscaling.enabled=true"], "autoscaling.enabled")):
        done = subprocess.run([HELM, "template", "r", CHART, *options], capture_output=True, text=True)
        check(done.returncode != 0 and "%s needs spentCheckpoints.existingClaim: set it to a ReadWriteMany claim" % what in done.stderr,
              "%s without a spent-checkpoint claim is refused, saying to set one" % what, done.stderr)
    kinds, objects = rendered("--set", "seccompProfile.type=Unconfined")
    validates(objects, "seccompProfile.type=Unconfined")
    check(kinds["Deployment"]["spec"]["template"]["spec"]["securityContext"]["seccompProfile"] == {"type": "Unconfined"},
          "seccompProfile.type=Unconfined runs the pod without a profile (and names no file)")


# Run under the profile: each refused call, made with arguments that would do nothing (a
# descriptor, pointer or command of -1), must fail with EPERM before the kernel sees it. Calls
# that could touch the machine with some argument (kexec, reboot, the domain name, the terminal)
# are not made at all.
NOT_MADE = {"kexec_load", "kexec_file_load", "reboot", "setdomainname", "vhangup"}
REFUSED_PROBE = r"""
import ctypes, json, sys
if "Seccomp:\t2" not in open("/proc/self/status").read():
    sys.exit("no seccomp filter is in force")
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
answers = {}
for name, number in json.loads(sys.argv[1]).items():
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(-1)] + [ctypes.c_long(0)] * 5)
    answers[name] = ctypes.get_errno() if result == -1 else "returned %d" % result
print(json.dumps(answers))
"""


def the_seccomp_profile(security, defaults, scmp):
    """The profile the pods name, as a file of deploy/seccomp/, and the function that installs it."""
    named = security["seccompProfile"]
    check(named == defaults["seccompProfile"] and named["type"] == "Localhost",
          "the pod runs under a Localhost seccomp profile by default", named)
    name = os.path.basename(named["localhostProfile"])
    path = os.path.join(SECCOMP_DIR, name)
    check(os.path.isfile(path), "the profile it names (%s) is deploy/seccomp/%s" % (named["localhostProfile"], name))
    with open(path) as file:
        try:
            profile = json.load(file)
        except ValueError as error:
            check(False, "deploy/seccomp/%s is JSON" % name, str(error))
    check(profile["defaultAction"] in ("SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD")
          and all(rule["action"] == "SCMP_ACT_ALLOW" and set(rule) <= {"names", "action", "comment"}
                  for rule in profile["syscalls"]),
          "it is an allowlist: a call it does not name fails (%s), and it names calls only to allow them, whatever"
          " their arguments" % profile["defaultAction"])
    check(sorted(profile["architectures"]) == ["SCMP_ARCH_AARCH64", "SCMP_ARCH_X32", "SCMP_ARCH_X86_64"],
          "for x86-64 (with x32, which the gateway's probe tries: a filter without it kills the trying thread) and"
          " aarch64, and no 32-bit calls", profile["architectures"])
    names = allowed(profile)
    known = [scmp.arch("SCMP_ARCH_X86_64"), scmp.arch("SCMP_ARCH_AARCH64")]
    unknown = sorted(name for name in names if all(scmp.number(name, arch) < 0 for arch in known))
    check(not unknown, "libseccomp knows every call it names on x86-64 or aarch64 (a misspelt one would be skipped)", unknown)
    check(not names & set(REFUSED), "it refuses the %d calls nothing of ours makes (io_uring, bpf, keys, userfaultfd,"
          " ptrace, kernel modules, unshare, setns, ...)" % len(REFUSED), sorted(names & set(REFUSED)))
    check(set(NEEDED) <= names, "it allows what a cell's setup does: clone and clone3 into namespaces, mount,"
          " pivot_root, open_tree, move_mount, Landlock, seccomp, ...", sorted(set(NEEDED) - names))
    install = scmp.compile(profile)
    numbers = {call: scmp.number(call) for call in REFUSED if call not in NOT_MADE and scmp.number(call) >= 0}
    done = subprocess.run([sys.executable, "-c", REFUSED_PROBE, json.dumps(numbers)], preexec_fn=install,
                          capture_output=True, text=True)
    answers = json.loads(done.stdout) if done.returncode == 0 else done.stderr
    check(done.returncode == 0 and set(answers) == set(numbers) and set(answers.values()) == {errno.EPERM},
          "compiled by libseccomp, it makes %d refused calls fail with EPERM in a process under it" % len(numbers), answers)
    return install


def the_image_runs_what_the_chart_runs(container, security, flags):
    image = containerfile()
    user = image["USER"].split(":")[0]
    check(user.isdigit() and int(user) == security["runAsUser"] and int(user) != 0,
          "the image's user (%s) is the pod's, not root" % user)
    command = image["command"]
    given, chart = flags_of(command), flags_of(container["args"])
    check(command[0] == "code-runtime" and command[1] == "mcp" and all(arg in flags for arg in given),
          "the image runs `code-runtime mcp` with flags it takes", command)
    check(all(given[flag] == chart[flag] for flag in ("--config", "--auth-token-file", "--checkpoint-key", "--http")),
          "the image's default command reads the files where the chart mounts them, on its port",
          {flag: (given[flag], chart[flag]) for flag in given})
    check(image["EXPOSE"] == chart["--http"].rsplit(":", 1)[1]
          and image["ENV"]["XDG_CACHE_HOME"] == next(env["value"] for env in container["env"] if env["name"] == "XDG_CACHE_HOME"),
          "the image exposes that port and caches where the chart mounts a volume", image)


def get(url, token=None):
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def mcp(base, token, session, body):
    """One JSON-RPC message to the gateway's /mcp: the session id it answers with, and its answer
    to `body` (None for a notification)."""
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    if session:
        headers.update({"Mcp-Session-Id": session, "Mcp-Protocol-Version": PROTOCOL})
    request = urllib.request.Request(base + "/mcp", data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        session = response.headers.get("mcp-session-id") or session
        if "id" not in body:
            return session, None
        if response.headers.get("content-type", "").startswith("application/json"):
            return session, json.loads(response.read())
        for line in response:
            if line.startswith(b"data:") and line[5:].strip():
                message = json.loads(line[5:])
                if message.get("id") == body["id"]:
                    return session, message
    return session, None


def runs(base, token):
    """A TypeScript and a Python program's results, each run in its cell."""
    params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "chart", "version": "1"}}
    session, _ = mcp(base, token, None, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    mcp(base, token, session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    results = {}
    for number, (language, code) in enumerate((("typescript", "return 6 * 7;"), ("python", "return sum(range(10))")), 2):
        arguments = {"code": code, "language": language}
        _, answer = mcp(base, token, session, {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                                               "params": {"name": "run_code", "arguments": arguments}})
        result = (answer or {}).get("result", answer)
        results[language] = json.loads(result["content"][0]["text"])["value"] if result and not result.get("isError") else result
    return results


def the_gateway_serves_the_chart(kinds, container, metric, install):
    """Starts the gateway with the chart's arguments and config (the pod's paths moved into a
    scratch directory, the port a free one on loopback) under the chart's seccomp profile, as the
    pod would."""
    scratch = tempfile.mkdtemp(prefix="code-runtime-chart-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    token = "chart-test-token"
    files = {
        "/config/servers.json": kinds["ConfigMap"]["data"]["servers.json"],
        "/run/secrets/code-runtime/auth-token": token + "\n",
        "/run/secrets/code-runtime/checkpoint-key": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
    }
    spent, pod_spent = os.path.join(scratch, "spent-checkpoints"), flags_of(container["args"])["--spent-checkpoints"]
    args = []
    for arg in container["args"]:
        if arg == pod_spent:
            arg = spent
        elif arg in files:
            moved = os.path.join(scratch, arg.strip("/").replace("/", "_"))
            # The pod's secrets are 0440 (fsGroup): readable by no other user, as the gateway
            # demands of its key.
            with open(os.open(moved, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o440), "w") as file:
                file.write(files[arg])
            arg = moved
        elif arg.startswith("0.0.0.0:"):
            arg = "127.0.0.1:0"
        args.append(arg)
    env = {**os.environ, "XDG_CACHE_HOME": os.path.join(scratch, "cache")}
    log_path = os.path.join(scratch, "gateway.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen([BINARY, *args], stdout=subprocess.DEVNULL, stderr=log, env=env, preexec_fn=install)
    try:
        deadline, text = time.monotonic() + 60, ""
        while "serving MCP on " not in text and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
            with open(log_path, errors="replace") as file:
                text = file.read()
        check("serving MCP on " in text, "the gateway serves under the profile with the chart's arguments and config"
              " (its sandbox probe passed: every layer holds): %s" % shlex.join(["code-runtime", *container["args"]]), text)
        base = text.split("serving MCP on ", 1)[1].split()[0].rsplit("/mcp", 1)[0]
        check(os.path.isdir(spent), "it made its spent-checkpoint directory")
        results = runs(base, token)
        check(results == {"typescript": 42, "python": 45},
              "a TypeScript and a Python program run in their cells under the profile", results)
        check(get(base + "/healthz") == (200, "ok\n") and get(base + "/livez") == (200, "live\n"),
              "it answers the readiness and liveness probes")
        status, metrics = get(base + "/metrics", token)
        check(status == 200 and re.search(r"^%s " % metric, metrics, re.M),
              "its /metrics (with the mounted token) has %s, the autoscaler's metric" % metric)
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
        check(code == 0, "SIGTERM drains it and it exits 0", code)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def main():
    flags = mcp_flags()
    helm("lint", CHART, "--strict")
    helm("lint", CHART, "--strict", *EVERY_OPTION)
    refused_renders()
    done = subprocess.run([HELM, "template", "r", CHART, "--set", "bogus=1"], capture_output=True, text=True)
    check(done.returncode != 0 and "bogus" in done.stderr, "a value the chart does not know is refused (values.schema.json)", done.stderr)
    defaults = values()
    kinds, objects = rendered()
    check(sorted(kinds) == ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service"],
          "the chart renders a ConfigMap, a Deployment, a PodDisruptionBudget and a Service", sorted(kinds))
    validates(objects, "default values")
    container, security = agrees(kinds, defaults, flags)
    every, objects = rendered(*EVERY_OPTION)
    validates(objects, "every option")
    metric = with_every_option(every)
    install = the_seccomp_profile(security, defaults, Libseccomp())
    the_image_runs_what_the_chart_runs(container, security, flags)
    the_gateway_serves_the_chart(kinds, container, metric, install)
    print("all deployment checks passed")


main()
