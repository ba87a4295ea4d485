#!/usr/bin/env bash
# Installs this build into a temporary prefix (`meson install --destdir`) and compiles a consumer
# against it twice: with `pkg-config --cflags pipeplan pipeplan-json` and with CMake's
# `find_package(pipeplan COMPONENTS json)`. Each consumer must build and run (exit 0).
#   consumer.sh BUILD_DIR SOURCE_DIR CXX
set -euo pipefail
build=$1 src=$2 cxx=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pipeplan-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/stage" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; echo "FAIL: meson install" >&2; exit 1; }
prefix=$(meson introspect --buildoptions "$build" | /usr/bin/env python3 -c \
  'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
root="$tmp/stage$prefix"
# Move the installed tree: both files must find the headers relative to themselves.
mv "$root" "$tmp/moved"
root="$tmp/moved"
echo "installed into $root:"
(cd "$root" && find . -name '*.pc' -o -name '*.cmake' | sort)

# 1. pkg-config (--define-prefix: the .pc files' prefix is where they now lie).
export PKG_CONFIG_PATH="$root/share/pkgconfig"
cflags=$(pkg-config --define-prefix --cflags pipeplan pipeplan-json)
echo "pkg-config --cflags pipeplan pipeplan-json: $cflags"
case "$cflags" in *"$root/include"*) ;; *) echo "FAIL: cflags do not name $root/include" >&2; exit 1 ;; esac
# shellcheck disable=SC2086
"$cxx" -std=c++20 $cflags -DPIPEPLAN_CONSUMER_JSON "$src/consumer/consumer.cpp" -o "$tmp/consumer-pc"
"$tmp/consumer-pc"

# 2. CMake (find_package with a component; the core target alone must not need nlohmann).
cmake -S "$src/consumer" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$root" -DCMAKE_CXX_COMPILER="$cxx" \
  >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; echo "FAIL: cmake configure" >&2; exit 1; }
grep -F "$root" "$tmp/cmake-build/CMakeCache.txt" | grep -m1 pipeplan_DIR
cmake --build "$tmp/cmake-build" >"$tmp/cmake-build.log" 2>&1 ||
  { cat "$tmp/cmake-build.log" >&2; echo "FAIL: cmake build" >&2; exit 1; }
"$tmp/cmake-build/consumer"

# 3. A component that does not exist is an error naming it.
mkdir "$tmp/bad"
printf 'cmake_minimum_required(VERSION 3.16)\nproject(bad CXX)\nfind_package(pipeplan REQUIRED COMPONENTS nosuch)\n' \
  >"$tmp/bad/CMakeLists.txt"
if cmake -S "$tmp/bad" -B "$tmp/bad-build" -DCMAKE_PREFIX_PATH="$root" >"$tmp/bad.log" 2>&1; then
  echo "FAIL: find_package(pipeplan COMPONENTS nosuch) succeeded" >&2; exit 1
fi
grep -q "nosuch" "$tmp/bad.log" || { cat "$tmp/bad.log" >&2; echo "FAIL: error does not name the component" >&2; exit 1; }
# 4. As a Meson subproject (the README's wrap, here a link to this source tree): the parent
#    gets pipeplan_dep, and pipeplan builds no tests, benchmarks or tool of its own.
srcroot=$(cd "$src/../.." && pwd)
mkdir -p "$tmp/parent/subprojects"
ln -s "$srcroot" "$tmp/parent/subprojects/pipeplan"
cp "$src/consumer/consumer.cpp" "$tmp/parent/"
cat >"$tmp/parent/meson.build" <<'MESON'
project('parent', 'cpp', default_options : ['cpp_std=c++20'])
pipeplan_dep = dependency('pipeplan', fallback : ['pipeplan', 'pipeplan_dep'])
executable('consumer', 'consumer.cpp', dependencies : pipeplan_dep)
MESON
meson setup "$tmp/parent-build" "$tmp/parent" --wrap-mode=nodownload --force-fallback-for=pipeplan \
  >"$tmp/parent.log" 2>&1 || { cat "$tmp/parent.log" >&2; echo "FAIL: meson setup of the parent" >&2; exit 1; }
targets=$(meson introspect --targets "$tmp/parent-build" | /usr/bin/env python3 -c \
  'import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
tests=$(meson introspect --tests "$tmp/parent-build" | /usr/bin/env python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
echo "subproject build: targets [$targets], $tests tests"
[ "$targets" = "consumer" ] || { echo "FAIL: as a subproject pipeplan added targets: $targets" >&2; exit 1; }
[ "$tests" = 0 ] || { echo "FAIL: as a subproject pipeplan added $tests tests" >&2; exit 1; }
ninja -C "$tmp/parent-build" >"$tmp/parent-ninja.log" 2>&1 || { cat "$tmp/parent-ninja.log" >&2; exit 1; }
"$tmp/parent-build/consumer"
echo "ok: pkg-config, CMake and Meson-subproject consumers built and ran"
echo "1 passed, 0 failed, 0 skipped"  # every suite's closing line
