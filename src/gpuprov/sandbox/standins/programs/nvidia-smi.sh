#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-smi from driver @VERSION@: a shell script, no NVIDIA code.
# Like the real tool on a host without a GPU it prints "No devices were found" and exits 6, unless
# @CONF@ (or the file named by $GPUPROV_STANDIN_GPUS_CONF) describes simulated GPUs, e.g.
#   GPU_COUNT=2
#   GPU_NAME="NVIDIA H100 80GB HBM3"
#   MEMORY_MIB=81559
#   REMAP_PENDING_GPUS="1"        GPU indices with a row remap pending (Remapped Rows/Pending: Yes)
#   REMAP_FAILED_GPUS=""          ... with Remapping Failure Occurred: Yes
#   ECC_UNCORRECTABLE_GPUS=""     ... with one DRAM Uncorrectable error (volatile and aggregate)
# Then it answers the summary table (laid out as driver @BRANCH@'s, smi_layout.py), -L, -q (a few fields),
# --query-gpu=...,--format=csv[,noheader][,nounits], -i and -pm.
DRIVER_VERSION="@VERSION@"
CUDA_VERSION="@CUDA@"
PM_STATE=/run/gpuprov-standin/persistence-mode
# -q pads its labels to column 42 up to 580.105.06 and to column 55 in 580.159.04 (both recorded:
# tests/recorded/nvidia-smi/SOURCES.md); which release between them widened it is not known, so the wider
# layout starts at the first release it was seen in.
# The same recording adds repair and inactive-remap fields to ECC Errors and Remapped Rows.
LABEL_WIDTH=42
LAYOUT_580_159=false
if [ "$(printf '%s\n' 580.159.04 "$DRIVER_VERSION" | sort -V | head -n 1)" = 580.159.04 ]; then
    LABEL_WIDTH=55
    LAYOUT_580_159=true
fi
# "GPU Recovery Action" (None on a healthy GPU) is in the recorded -q of 565.57.01, 570.124.06 and 580.159.04
# and not in 550.127.05 or 555.42.02 (NVML added the field in 565), so it starts at 565.57.01.
PRINTS_RECOVERY_ACTION=false
if [ "$(printf '%s\n' 565.57.01 "$DRIVER_VERSION" | sort -V | head -n 1)" = 565.57.01 ]; then
    PRINTS_RECOVERY_ACTION=true
fi
. ./gpus-conf.sh

usage() {
    cat <<EOF
NVIDIA System Management Interface -- v$DRIVER_VERSION (gpuprov sandbox stand-in, not NVIDIA software)

Implemented:
    nvidia-smi                       summary table
    nvidia-smi -L                    list the GPUs
    nvidia-smi -q                    Product Name, Persistence Mode, GPU UUID, Minor Number, GPU Recovery
                                     Action (driver 565 and later), PCI (Bus Id,
                                     GPU Link Info), Performance State, Clocks Event Reasons, ECC Mode,
                                     ECC Errors, Retired Pages and Remapped Rows of each GPU
    nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits]
        FIELDS: index count name uuid driver_version pci.bus_id memory.total memory.used
                memory.free persistence_mode compute_cap compute_mode utilization.gpu temperature.gpu
                ecc.mode.current ecc.errors.{corrected,uncorrected}.{volatile,aggregate}.{sram,dram,total}
    nvidia-smi -i N ...              only GPU N
    nvidia-smi -pm 0|1               persistence mode
    nvidia-smi --version
Simulated GPUs come from $CONF (GPU_COUNT, GPU_NAME, MEMORY_MIB, COMPUTE_CAP, PCIE_GEN, PCIE_WIDTH,
REMAP_PENDING_GPUS, REMAP_FAILED_GPUS, ECC_UNCORRECTABLE_GPUS).
EOF
}

invalid() {
    echo "$1" >&2
    echo "Please run 'nvidia-smi -h' for help." >&2
    exit 2
}

gpu_uuid() {
    # Stable per host and index, in the real "GPU-8-4-4-4-12" form.
    printf '%s-gpu-%s' "$(uname -n)" "$1" | md5sum | \
        sed 's/^\(........\)\(....\)\(....\)\(....\)\(............\).*/GPU-\1-\2-\3-\4-\5/'
}

bus_id() {
    printf '00000000:%02X:00.0' $((0x18 + $1 * 0x10))
}

persistence_mode() {
    if [ -e "$PM_STATE" ]; then echo Enabled; else echo Disabled; fi
}

gpu_indices() {
    if [ -n "$SELECTED" ]; then
        echo "$SELECTED"
        return
    fi
    i=0
    while [ "$i" -lt "$GPU_COUNT" ]; do
        echo "$i"
        i=$((i + 1))
    done
}

field_header() {
    case "$1" in
        gpu_name) echo name ;;
        gpu_uuid) echo uuid ;;
        gpu_bus_id) echo pci.bus_id ;;
        memory.total|memory.used|memory.free) echo "$1 [MiB]" ;;
        utilization.gpu) echo "$1 [%]" ;;
        *) echo "$1" ;;
    esac
}

field_value() {
    case "$1" in
        index) echo "$2" ;;
        count) echo "$GPU_COUNT" ;;
        name|gpu_name) echo "$GPU_NAME" ;;
        uuid|gpu_uuid) gpu_uuid "$2" ;;
        driver_version) echo "$DRIVER_VERSION" ;;
        pci.bus_id|gpu_bus_id) bus_id "$2" ;;
        memory.total) echo "$MEMORY_MIB$MIB" ;;
        memory.used) echo "0$MIB" ;;
        memory.free) echo "$MEMORY_MIB$MIB" ;;
        persistence_mode) persistence_mode ;;
        compute_cap) echo "$COMPUTE_CAP" ;;
        compute_mode) echo Default ;;
        utilization.gpu) echo "0$PERCENT" ;;
        temperature.gpu) echo 30 ;;
        # The ECC counters by the names `--help-query-gpu` gives them (the 535.161.07 H100 recording,
        # tests/recorded/nvidia-smi/query-gpu-ecc-4xH100-535.161.07): the same counts -q prints.
        ecc.mode.current) echo Enabled ;;
        ecc.errors.*) ecc_count "$1" "$2" ;;
        *) return 1 ;;
    esac
}

ecc_count() {
    # Counter $1 of GPU $2: uncorrectable DRAM (and so total) 1 on the ECC_UNCORRECTABLE_GPUS, as -q says.
    case "$1" in
        ecc.errors.corrected.volatile.*|ecc.errors.corrected.aggregate.*) ;;
        ecc.errors.uncorrected.volatile.*|ecc.errors.uncorrected.aggregate.*) ;;
        *) return 1 ;;
    esac
    case "${1##*.}" in
        sram) echo 0 ;;
        dram|device_memory|total)
            case "$1" in
                ecc.errors.uncorrected.*) if listed "$2" "$ECC_UNCORRECTABLE_GPUS"; then echo 1; else echo 0; fi ;;
                *) echo 0 ;;
            esac ;;
        *) return 1 ;;
    esac
}

query_csv() {
    fields=$(echo "$QUERY" | tr ',' ' ')
    for f in $fields; do
        field_value "$f" 0 >/dev/null || invalid "Field \"$f\" is not a valid field to query."
    done
    if [ "$HEADER" = 1 ]; then
        line=""
        for f in $fields; do line="${line:+$line, }$(field_header "$f")"; done
        echo "$line"
    fi
    for i in $(gpu_indices); do
        line=""
        for f in $fields; do line="${line:+$line, }$(field_value "$f" "$i")"; done
        echo "$line"
    done
}

list_gpus() {
    for i in $(gpu_indices); do
        echo "GPU $i: $GPU_NAME (UUID: $(gpu_uuid "$i"))"
    done
}

row() {
    # One line of a GPU's block; the formats are filled in per driver branch (smi_layout.py).
    fmt=$1
    shift
    # shellcheck disable=SC2059
    printf "$fmt\n" "$@"
}

summary() {
    # The real timestamp line is padded with 7 spaces (tests/recorded/nvidia-smi/).
    printf '%s       \n' "$(date '+%a %b %e %H:%M:%S %Y')"
    echo '@TABLE_TOP@'
    row '@HEADER_FORMAT@' "$DRIVER_VERSION" "$DRIVER_VERSION" "$CUDA_VERSION"
    cat <<'EOF'
@TABLE_HEAD@
EOF
    for i in $(gpu_indices); do
        pm=On
        [ "$(persistence_mode)" = Enabled ] || pm=Off
        # "On  |" and "Off |": the persistence word is left-aligned, as in the recordings.
        row '@GPU_NAME_FORMAT@' "$i" "$GPU_NAME" "$pm" "$(bus_id "$i")" Off 0
        row '@GPU_USAGE_FORMAT@' 70W 700W 0MiB "${MEMORY_MIB}MiB" 0% Default
        row '@GPU_MIG_FORMAT@' "" "" Disabled
        echo '@GPU_BORDER@'
    done
    cat <<'EOF'
@TABLE_PROCESSES@
EOF
}

query_all() {
    # -q: the real tool's layout (labels padded to column LABEL_WIDTH), only the fields listed in usage.
    echo
    echo "==============NVSMI LOG=============="
    echo
    printf "%-${LABEL_WIDTH}s: %s\n" Timestamp "$(date '+%a %b %e %H:%M:%S %Y')" \
        "Driver Version" "$DRIVER_VERSION" "CUDA Version" "$CUDA_VERSION"
    echo
    printf "%-${LABEL_WIDTH}s: %s\n" "Attached GPUs" "$GPU_COUNT"
    first=1
    for i in $(gpu_indices); do
        [ "$first" = 1 ] || echo
        first=0
        echo "GPU $(bus_id "$i")"
        printf "%-${LABEL_WIDTH}s: %s\n" "    Product Name" "$GPU_NAME" "    Persistence Mode" "$(persistence_mode)" \
            "    GPU UUID" "$(gpu_uuid "$i")" "    Minor Number" "$i"
        if "$PRINTS_RECOVERY_ACTION"; then
            printf "%-${LABEL_WIDTH}s: %s\n" "    GPU Recovery Action" None
        fi
        query_health "$i"
    done
}

listed() {
    # Whether GPU index $1 is in the space-separated list $2.
    case " $2 " in *" $1 "*) return 0 ;; *) return 1 ;; esac
}

yes_no() {
    if listed "$1" "$2"; then echo Yes; else echo No; fi
}

query_health() {
    # GPU $1's sections as an Ampere/Hopper data-center GPU shows them on drivers 550 to 570
    # (tests/recorded/nvidia-smi/query-full-*, FIELDS.md), idle as the recorded H100 (P0, Idle Active, at its
    # full link).
    ecc=0
    listed "$1" "$ECC_UNCORRECTABLE_GPUS" && ecc=1
    echo "    PCI"
    printf "%-${LABEL_WIDTH}s: %s\n" "        Bus Id" "$(bus_id "$1")"
    echo "        GPU Link Info"
    echo "            PCIe Generation"
    printf "%-${LABEL_WIDTH}s: %s\n" "                Max" "$PCIE_GEN" "                Current" "$PCIE_GEN" \
        "                Device Current" "$PCIE_GEN" "                Device Max" "$PCIE_GEN" \
        "                Host Max" "$PCIE_GEN"
    echo "            Link Width"
    printf "%-${LABEL_WIDTH}s: %s\n" "                Max" "${PCIE_WIDTH}x" "                Current" "${PCIE_WIDTH}x"
    printf "%-${LABEL_WIDTH}s: %s\n" "    Performance State" P0
    echo "    Clocks Event Reasons"
    printf "%-${LABEL_WIDTH}s: %s\n" "        Idle" Active "        Applications Clocks Setting" "Not Active" \
        "        SW Power Cap" "Not Active" "        HW Slowdown" "Not Active" \
        "            HW Thermal Slowdown" "Not Active" "            HW Power Brake Slowdown" "Not Active" \
        "        Sync Boost" "Not Active" "        SW Thermal Slowdown" "Not Active" \
        "        Display Clock Setting" "Not Active"
    echo "    ECC Mode"
    printf "%-${LABEL_WIDTH}s: %s\n" "        Current" Enabled "        Pending" Enabled
    echo "    ECC Errors"
    for scope in Volatile Aggregate; do
        echo "        $scope"
        printf "%-${LABEL_WIDTH}s: %s\n" "            SRAM Correctable" 0 "            SRAM Uncorrectable Parity" 0 \
            "            SRAM Uncorrectable SEC-DED" 0 "            DRAM Correctable" 0 \
            "            DRAM Uncorrectable" "$ecc"
    done
    printf "%-${LABEL_WIDTH}s: %s\n" "            SRAM Threshold Exceeded" No
    echo "        Aggregate Uncorrectable SRAM Sources"
    printf "%-${LABEL_WIDTH}s: %s\n" "            SRAM L2" 0 "            SRAM SM" 0 "            SRAM Microcontroller" 0 \
        "            SRAM PCIE" 0 "            SRAM Other" 0
    if "$LAYOUT_580_159"; then
        printf "%-${LABEL_WIDTH}s: %s\n" "        Channel Repair Pending" No "        TPC Repair Pending" No \
            "        Unrepairable Memory" No
    fi
    echo "    Retired Pages"
    printf "%-${LABEL_WIDTH}s: %s\n" "        Single Bit ECC" N/A "        Double Bit ECC" N/A \
        "        Pending Page Blacklist" N/A
    echo "    Remapped Rows"
    if "$LAYOUT_580_159"; then
        printf "%-${LABEL_WIDTH}s: %s\n" "        Correctable Error" 0 "        Inactive Correctable Error" 0 \
            "        Uncorrectable Error" "$ecc" "        Inactive Uncorrectable Error" 0
    else
        printf "%-${LABEL_WIDTH}s: %s\n" "        Correctable Error" 0 "        Uncorrectable Error" "$ecc"
    fi
    printf "%-${LABEL_WIDTH}s: %s\n" \
        "        Pending" "$(yes_no "$1" "$REMAP_PENDING_GPUS")" \
        "        Remapping Failure Occurred" "$(yes_no "$1" "$REMAP_FAILED_GPUS")"
    echo "        Bank Remap Availability Histogram"
    printf "%-${LABEL_WIDTH}s: %s\n" "            Max" "2560 bank(s)" "            High" "0 bank(s)" \
        "            Partial" "0 bank(s)" "            Low" "0 bank(s)" "            None" "0 bank(s)"
}

set_persistence_mode() {
    case "$1" in
        1|ENABLED|Enabled) word=Enabled ;;
        0|DISABLED|Disabled) word=Disabled ;;
        *) invalid "Invalid persistence mode: $1" ;;
    esac
    if [ "$(id -u)" != 0 ]; then
        echo "Unable to set persistence mode: Insufficient Permissions" >&2
        exit 4
    fi
    mkdir -p "$(dirname "$PM_STATE")"
    if [ "$word" = Enabled ]; then touch "$PM_STATE"; else rm -f "$PM_STATE"; fi
    for i in $(gpu_indices); do
        echo "$word persistence mode for GPU $(bus_id "$i")."
    done
    echo "All done."
}

MODE=summary
QUERY=""
FORMAT=""
SELECTED=""
PM=""
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --version)
            echo "NVIDIA-SMI version  : $DRIVER_VERSION"
            echo "NVML version        : ${DRIVER_VERSION%.*}"
            if [ "$HAVE_GPUS" = 1 ]; then
                echo "DRIVER version      : $DRIVER_VERSION"
                echo "CUDA Version        : $CUDA_VERSION"
            fi
            exit 0 ;;
        -L|--list-gpus) MODE=list ;;
        -q|--query) MODE=query_all ;;
        --query-gpu=*) MODE=query; QUERY=${1#--query-gpu=} ;;
        --query-gpu) MODE=query; shift; QUERY=$1 ;;
        --format=*) FORMAT=${1#--format=} ;;
        --format) shift; FORMAT=$1 ;;
        -i|--id) shift; SELECTED=$1 ;;
        --id=*) SELECTED=${1#--id=} ;;
        -pm|--persistence-mode) MODE=pm; shift; PM=$1 ;;
        --persistence-mode=*) MODE=pm; PM=${1#--persistence-mode=} ;;
        *) invalid "Invalid combination of input arguments (this stand-in does not implement '$1')." ;;
    esac
    shift
done

HEADER=1
MIB=" MiB"
PERCENT=" %"
if [ "$MODE" = query ]; then
    case ",$FORMAT," in
        *,csv,*) ;;
        *) invalid "The --query-gpu option needs --format=csv[,noheader][,nounits]." ;;
    esac
    case ",$FORMAT," in *,noheader,*) HEADER=0 ;; esac
    case ",$FORMAT," in *,nounits,*) MIB=""; PERCENT="" ;; esac
fi

if [ "$HAVE_GPUS" != 1 ] || [ "$GPU_COUNT" -lt 1 ]; then
    echo "No devices were found"
    exit 6
fi
if [ -n "$SELECTED" ] && ! [ "$SELECTED" -lt "$GPU_COUNT" ] 2>/dev/null; then
    echo "No devices were found"
    exit 6
fi

case "$MODE" in
    list) list_gpus ;;
    query) query_csv ;;
    query_all) query_all ;;
    pm) set_persistence_mode "$PM" ;;
    *) summary ;;
esac
