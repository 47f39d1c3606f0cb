"""The Helm chart and the Containerfile, checked offline: `python chart.py BINARY` (with the tools of
deploy/requirements.txt). Helm itself lints and renders the chart (default values, and every
option on); every rendered object is validated against the Kubernetes API schema of the oldest
and newest versions the chart supports, unknown fields refused; then what the objects say is
held against the gateway they run: each flag is one `code-runtime mcp` takes, the probes, ports,
secret and config paths agree, the grace period covers the longest run, the memory limit the
runs' budgets, and the gateway started with the chart's arguments and rendered config serves,
answers the probes and exposes the metric the autoscaler reads, then drains on SIGTERM.
Exits non-zero on the first failed check. Run by code-runtime-cli/tests/it/deploy.rs."""

import atexit
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
HELM = os.path.join(os.path.dirname(sys.executable), "helm")
# The oldest Kubernetes the chart is for (the container's appArmorProfile field is 1.30's), and
# the newest schema the validator has.
VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
EVERY_OPTION = ["--set", "autoscaling.enabled=true", "--set", "spentCheckpoints.existingClaim=spent"]


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
          and security["seccompProfile"]["type"] == "Unconfined",
          "user namespaces of the pod's own with an unmasked /proc, and a seccomp profile that lets a cell make"
          " its namespaces (the cell installs its own filter)")
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
          and claim["persistentVolumeClaim"]["claimName"] == "spent",
          "--spent-checkpoints is on the shared claim", given["--spent-checkpoints"])
    return hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]


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


def the_gateway_serves_the_chart(kinds, container, metric):
    """Starts the gateway with the chart's arguments and config (the pod's paths moved into a
    scratch directory, the port a free one on loopback), as the pod would."""
    scratch = tempfile.mkdtemp(prefix="code-runtime-chart-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    token = "chart-test-token"
    files = {
        "/config/servers.json": kinds["ConfigMap"]["data"]["servers.json"],
        "/run/secrets/code-runtime/auth-token": token + "\n",
        "/run/secrets/code-runtime/checkpoint-key": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
    }
    args = []
    for arg in container["args"]:
        if arg in files:
            moved = os.path.join(scratch, arg.strip("/").replace("/", "_"))
            with open(moved, "w") as file:
                file.write(files[arg])
            arg = moved
        elif arg.startswith("0.0.0.0:"):
            arg = "127.0.0.1:0"
        args.append(arg)
    env = {**os.environ, "XDG_CACHE_HOME": os.path.join(scratch, "cache")}
    log_path = os.path.join(scratch, "gateway.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen([BINARY, *args], stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        deadline, text = time.monotonic() + 60, ""
        while "serving MCP on " not in text and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
            with open(log_path, errors="replace") as file:
                text = file.read()
        check("serving MCP on " in text, "the gateway serves with the chart's arguments and config: %s"
              % shlex.join(["code-runtime", *container["args"]]), text)
        base = text.split("serving MCP on ", 1)[1].split()[0].rsplit("/mcp", 1)[0]
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
    the_image_runs_what_the_chart_runs(container, security, flags)
    the_gateway_serves_the_chart(kinds, container, metric)
    print("all deployment checks passed")


main()
