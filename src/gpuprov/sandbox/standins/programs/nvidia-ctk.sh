#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-ctk @VERSION@: a shell script, no NVIDIA code.
# Implemented: --version, and `runtime configure --runtime=docker [--config=F] [--dry-run] [--cdi.enabled]
# [--set-as-default]`, which registers the nvidia runtime in Docker's daemon.json as the real one does
# (pkg/config/engine/docker/docker.go of github.com/NVIDIA/nvidia-container-toolkit v1.18.0: the runtime
# {"args": [], "path": "nvidia-container-runtime"}, "features": {"cdi": true} for --cdi.enabled, Go's
# json.MarshalIndent with 4 spaces and map keys sorted; --dry-run prints the result instead of writing it).
case "$1" in
    --version|-v)
        echo "NVIDIA Container Toolkit CLI version @VERSION@"
        echo "commit: gpuprov-sandbox-stand-in"
        exit 0 ;;
esac
if [ "$1 $2" != "runtime configure" ]; then
    echo "nvidia-ctk (gpuprov sandbox stand-in) implements only --version and 'runtime configure'" >&2
    exit 1
fi
shift 2
exec python3 - "$@" <<'PYTHON'
import json, os, sys
runtime, config, default, dry_run, cdi = "docker", "/etc/docker/daemon.json", False, False, False
for arg in sys.argv[1:]:
    if arg.startswith("--runtime="):
        runtime = arg.split("=", 1)[1]
    elif arg.startswith("--config="):
        config = arg.split("=", 1)[1]
    elif arg == "--set-as-default":
        default = True
    elif arg == "--dry-run":
        dry_run = True
    elif arg == "--cdi.enabled":
        cdi = True
if runtime != "docker":
    sys.exit("nvidia-ctk (gpuprov sandbox stand-in) configures only --runtime=docker")
settings = {}
if os.path.exists(config):
    with open(config) as f:
        settings = json.load(f)
settings.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
if default:
    settings["default-runtime"] = "nvidia"
if cdi:
    settings.setdefault("features", {})["cdi"] = True
text = json.dumps(settings, indent=4, sort_keys=True)
if dry_run:
    print(text)
    sys.exit(0)
os.makedirs(os.path.dirname(config) or ".", exist_ok=True)
with open(config, "w") as f:
    f.write(text)
print("INFO Wrote updated config to " + config)
print("INFO It is recommended that docker daemon be restarted.")
PYTHON
