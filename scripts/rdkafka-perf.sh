# Sourced by the benchmark scripts: librdkafka's rdkafka_performance, the
# neutral second client, in $rdkafka_perf. Compiled from the librdkafka
# source the rdkafka-sys crate vendors, with the static library cargo built
# from it with OpenSSL for the tests (built here if missing), and again
# whenever that library is newer than the binary.
rdkafka_perf=target/release/rdkafka_performance
rdkafka_out() {
    for d in target/release/build/rdkafka-sys-*/out target/debug/build/rdkafka-sys-*/out; do
        [ -f "$d/src/librdkafka-static.a" ] && grep -q 'WITH_SSL 1' "$d/config.h" 2>/dev/null \
            && { echo "$d"; return; }
    done
}
[ -n "$(rdkafka_out)" ] || cargo build -q -p broker --tests  # the tests' librdkafka
rdkafka_lib=$(rdkafka_out)
if [ ! -x "$rdkafka_perf" ] || [ "$rdkafka_lib/src/librdkafka-static.a" -nt "$rdkafka_perf" ]; then
    zstd=$(grep -o '/[^[:space:]]*zstd-sys-[^/]*/out' "$rdkafka_lib/Makefile.config" | head -1)
    gcc -O2 -I"$rdkafka_lib/src" "$rdkafka_lib/examples/rdkafka_performance.c" -o "$rdkafka_perf" \
        "$rdkafka_lib/src/librdkafka-static.a" -L"$zstd" -lzstd -lssl -lcrypto -lz -lpthread -lm -ldl -lrt
fi
