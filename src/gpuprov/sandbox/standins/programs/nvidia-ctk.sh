#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-ctk @VERSION@: a shell script, no NVIDIA code.
# Implemented: --version, and `runtime configure --runtime=docker [--config=F] [--set-as-default]`, which
# registers the nvidia runtime in Docker's daemon.json as the real one does.
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
exec python3 - "$@" <<'EOF'
import json, os, sys
runtime, config, default = "docker", "/etc/docker/daemon.json", False
for arg in sys.argv[1:]:
    if arg.startswith("--runtime="):
        runtime = arg.split("=", 1)[1]
    elif arg.startswith("--config="):
        config = arg.split("=", 1)[1]
    elif arg == "--set-as-default":
        default = True
if runtime != "docker":
    sys.exit("nvidia-ctk (gpuprov sandbox stand-in) configures only --runtime=docker")
settings = {}
if os.path.exists(config):
    with open(config) as f:
        settings = json.load(f)
settings.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
if default:
    settings["default-runtime"] = "nvidia"
os.makedirs(os.path.dirname(config) or ".", exist_ok=True)
with open(config, "w") as f:
    json.dump(settings, f, indent=4)
    f.write("\n")
print("INFO Wrote updated config to " + config)
print("INFO It is recommended that docker daemon be restarted.")
EOF
