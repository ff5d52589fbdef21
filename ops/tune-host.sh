#!/usr/bin/env bash
# The host settings the broker wants on bare-metal Linux with NVMe
# (docs/operations.md explains each). Prints, for every setting, what it is
# now and what it should be; changes nothing unless given --apply (as root).
# Settings applied this way last until reboot; --persist also writes
# /etc/sysctl.d/90-broker.conf and /etc/security/limits.d/90-broker.conf.
#
# Usage: ops/tune-host.sh [--apply] [--persist] [--irq-cores LIST]
#   --irq-cores LIST   cores to steer NVMe and NIC interrupts to (e.g. 0);
#                      the broker then runs with --shards on the others
set -euo pipefail

apply=false
persist=false
irq_cores=""
while [ $# -gt 0 ]; do
    case "$1" in
        --apply) apply=true; shift ;;
        --persist) persist=true; apply=true; shift ;;
        --irq-cores) irq_cores="$2"; shift 2 ;;
        *) echo "usage: ops/tune-host.sh [--apply] [--persist] [--irq-cores LIST]" >&2; exit 2 ;;
    esac
done
if $apply && [ "$(id -u)" -ne 0 ]; then
    echo "--apply needs root" >&2
    exit 1
fi

changes=0
# report NAME CURRENT WANTED: prints one line; returns 0 if a change is needed.
report() {
    local name="$1" current="$2" wanted="$3"
    if [ "$current" = "$wanted" ]; then
        printf '  ok      %-44s %s\n' "$name" "$current"
        return 1
    fi
    printf '  change  %-44s %s -> %s\n' "$name" "${current:-unset}" "$wanted"
    changes=$((changes + 1))
    return 0
}

# set_file PATH WANTED [NAME]: a sysfs or procfs file.
set_file() {
    local path="$1" wanted="$2" name="${3:-$1}"
    [ -e "$path" ] || { printf '  n/a     %-44s (not on this host)\n' "$name"; return; }
    local current
    current=$(cat "$path" 2>/dev/null || true)
    # Selector files show the choice in brackets: "[none] mq-deadline".
    if [[ "$current" =~ \[([^]]*)\] ]]; then current="${BASH_REMATCH[1]}"; fi
    if report "$name" "$current" "$wanted" && $apply; then
        echo "$wanted" > "$path" || echo "    (could not write $path)"
    fi
}

sysctls=(
    "net.core.rmem_max=16777216"
    "net.core.wmem_max=16777216"
    "net.ipv4.tcp_rmem=4096 131072 16777216"
    "net.ipv4.tcp_wmem=4096 131072 16777216"
    "net.core.somaxconn=4096"
    "net.ipv4.tcp_max_syn_backlog=4096"
    "net.core.netdev_max_backlog=16384"
    "vm.swappiness=1"
    "vm.max_map_count=1048576"
    "fs.file-max=4194304"
    "fs.nr_open=4194304"
)

# at_least CURRENT WANTED: every number of CURRENT is >= its counterpart.
at_least() {
    local -a have=($1) want=($2)
    [ ${#have[@]} -eq ${#want[@]} ] || return 1
    for i in "${!want[@]}"; do
        [ "${have[$i]}" -ge "${want[$i]}" ] 2>/dev/null || return 1
    done
}

echo "sysctls (limits and buffers are only raised; swappiness only lowered):"
for entry in "${sysctls[@]}"; do
    key="${entry%%=*}"
    wanted="${entry#*=}"
    current=$(sysctl -n "$key" 2>/dev/null | tr -s '\t ' ' ' || true)
    good=false
    if [ "$key" = vm.swappiness ]; then
        [ -n "$current" ] && [ "$current" -le "$wanted" ] && good=true
    else
        at_least "$current" "$wanted" && good=true
    fi
    if $good; then
        printf '  ok      %-44s %s\n' "$key" "$current"
        continue
    fi
    if report "$key" "$current" "$wanted" && $apply; then
        sysctl -q -w "$key=$wanted" || echo "    (could not set $key)"
    fi
done

echo "limits (for the shell running the broker; the systemd unit sets its own):"
report "ulimit -l (locked memory, KiB)" "$(ulimit -l)" "unlimited" || true
# The hard limit: broker serve raises its own soft limit to it.
report "ulimit -Hn (open files, hard)" "$(ulimit -Hn)" "1048576" || true

echo "CPU frequency governor:"
for governor in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
    [ -e "$governor" ] || { printf '  n/a     %-44s (no cpufreq on this host)\n' "scaling_governor"; break; }
    set_file "$governor" performance "$(echo "$governor" | cut -d/ -f6) governor"
done

echo "NVMe block devices:"
found=false
for queue in /sys/block/nvme*/queue; do
    [ -d "$queue" ] || continue
    found=true
    dev=$(echo "$queue" | cut -d/ -f4)
    set_file "$queue/scheduler" none "$dev scheduler"
    set_file "$queue/nomerges" 2 "$dev nomerges"
    set_file "$queue/rq_affinity" 2 "$dev rq_affinity"
done
$found || printf '  n/a     %-44s (no NVMe devices)\n' "nvme queues"

echo "transparent huge pages:"
set_file /sys/kernel/mm/transparent_hugepage/enabled madvise "THP enabled"
set_file /sys/kernel/mm/transparent_hugepage/defrag never "THP defrag"

echo "interrupts:"
if [ -z "$irq_cores" ]; then
    printf '  skip    %-44s %s\n' "IRQ affinity" "(give --irq-cores to steer NVMe/NIC interrupts off the broker's cores)"
else
    if systemctl is-active --quiet irqbalance 2>/dev/null; then
        report "irqbalance" "active" "stopped" && $apply && systemctl stop irqbalance
    fi
    for irq in $(grep -E 'nvme|eth|ens|enp|mlx|ixgbe|i40e|ice' /proc/interrupts | cut -d: -f1 | tr -d ' '); do
        set_file "/proc/irq/$irq/smp_affinity_list" "$irq_cores" "irq $irq affinity"
    done
fi

if $persist; then
    {
        echo "# Written by ops/tune-host.sh"
        for entry in "${sysctls[@]}"; do echo "${entry%%=*} = ${entry#*=}"; done
    } > /etc/sysctl.d/90-broker.conf
    cat > /etc/security/limits.d/90-broker.conf <<'EOF'
# Written by ops/tune-host.sh: glommio locks its io_uring buffers.
*    -    memlock    unlimited
*    -    nofile     1048576
EOF
    echo "wrote /etc/sysctl.d/90-broker.conf and /etc/security/limits.d/90-broker.conf"
fi

if $apply; then
    echo "$changes settings differed from the wanted values; applied (until reboot unless --persist)."
else
    echo "$changes settings differ from the wanted values; run with --apply (as root) to change them."
fi
