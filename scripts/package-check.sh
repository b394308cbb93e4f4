#!/usr/bin/env bash
# Every published crate packages, and every package compiles alone, as crates.io would serve it.
#
#   bash scripts/package-check.sh [TARGET_DIR]      (or TOOLGATE_PACKAGE_CHECK_TARGET=DIR; default
#                                                    target/package-check)
#
# What it proves (what `cargo publish --dry-run --workspace` proved, without its codegen):
#
#  1. Every published crate packages: `cargo package --workspace --no-verify` writes one .crate per
#     workspace member that is not `publish = false` (the set `cargo publish --workspace` would
#     upload; the others are excluded by name), into TARGET_DIR/package.
#  2. Each .crate, unpacked, compiles on its own with its own features. The unpacked crates become the
#     members of a throwaway workspace, with a `[patch.crates-io]` entry for each one a sibling depends
#     on (a packaged manifest names its siblings by version only, as crates.io sees them), and
#     `cargo check -p CRATE` runs once per crate: one crate per invocation, so a crate that compiles
#     only because a sibling turned on a dependency's feature fails here, as it would for a user.
#     Because the unpacked source is what is compiled, a file the package leaves out (a module,
#     something read by include_str!/include_bytes!, the directory sqlx::migrate! reads, a file a build
#     script reads) fails the check; a build script left out of a package, which cargo only warns
#     about, is refused.
#  3. The dependency versions are the repository's Cargo.lock's: it is copied in and every check runs
#     with `--locked`; and no sibling may come from crates.io instead of its package.
#  4. Compiling does not modify the unpacked sources (cargo's verify step refuses a build script that
#     writes into its source directory; the same is checked here by comparing checksums).
#
# Why `cargo check` instead of `cargo publish --dry-run`: the dry run builds (codegen and links) each
# package, which took about 13 minutes of CI's run on a 2-core machine; type-checking the same sources
# with the same features and dependency versions finds the same missing files, features and
# dependencies. Build scripts still compile and run (llama.cpp and the bundled C libraries are still
# compiled, or, in a target directory shared with the workspace's build, reused: see below). What only
# codegen or linking would find (a missing native library at link time, a post-monomorphization error) is
# left to the workspace's own build and tests, which CI runs next.
#
# The packaging tolerates a dirty git tree (`--allow-dirty`): CI runs in a copy without `.git`, where
# cargo has no VCS state to check, and a local run checks what is in the working tree. The throwaway
# workspace lives in a temp directory outside the checkout, so the repository's `.cargo/config.toml`
# does not apply to it (a crates.io user does not have it; with a shared target directory its [env] table
# does, see below). Temp files are removed on every exit; the target directory is left for the caller (CI
# removes it afterwards). Needs cargo, python3 (to read
# `cargo metadata`; 3.11 or later with a shared target, to read TOML), tar and sha256sum.
set -euo pipefail

# The target directory, made absolute before moving to the checkout's root (a relative argument is relative
# to where the script was run from).
target=${1:-${TOOLGATE_PACKAGE_CHECK_TARGET:-$(dirname "$0")/../target/package-check}}
mkdir -p "$target"
target=$(cd "$target" && pwd)
cd "$(dirname "$0")/.."
root=$PWD

# llama.cpp (toolgate-local's llama-cpp-sys-2) is compiled by its build script, which `cargo check` still
# runs, in CMake's Release mode (-O3) unless told otherwise. Into a target directory of its own (a local run),
# nothing links it, so the optimizer is wasted: CMake's `None` build type compiles it at -O0 without debug info
# (Debug's -g made each build 1.2 GB instead of 0.5 GB). This changes no flag of any Rust crate, only how the
# C++ library is compiled.
#
# With TOOLGATE_PACKAGE_CHECK_SHARED_TARGET=1 (CI, whose one target directory also holds the workspace's build,
# made before this check) the checks reuse the workspace's llama.cpp instead of compiling it again. Cargo keys
# a build script's output directory by the features and the profile of it and of its build dependencies:
#  - the features: checked alone, toolgate-local and toolgate-cli resolve the same features for llama.cpp's build
#    dependencies as the workspace (toolgate-local's [build-dependencies] see to that);
#  - the profile: the throwaway workspace gets the repository's [profile.*] tables (a workspace's profiles
#    come from its root manifest only; without them the build scripts were built with other `strip`
#    settings). Profiles change how code is compiled, not what type-checks.
# In that directory the build script reruns when an environment variable it watches differs from the last
# run's, and would then compile llama.cpp again, in that directory, with those values, which the test build
# after this check would keep (no variable it reads changes back). So the build keeps the workspace's inputs:
# LLAMA_LIB_PROFILE as it is, and the [env] table of the repository's .cargo/config.toml (llama.cpp's SIMD
# switches, GGML_*), which cargo would not apply in the throwaway workspace outside the checkout: it is
# written into a .cargo/config.toml above that workspace (nothing else of the repository's configuration).
shared_target=${TOOLGATE_PACKAGE_CHECK_SHARED_TARGET:-}
if [ "$shared_target" != 1 ]; then
  export LLAMA_LIB_PROFILE=${LLAMA_LIB_PROFILE:-None}
fi

say() { echo "package-check: $*" >&2; }
fail() {
  say "FAILED: $*"
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-package-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. Package the crates `cargo publish --workspace` would publish. `cargo package --workspace` packages
# every member, `publish = false` ones included, so those (and any whose `publish` list leaves out
# crates.io) are excluded by name, read from `cargo metadata` (its `publish` is null when unrestricted).
# The members with a build script are noted too (see the unpacking below).
# A fresh package directory, so no .crate left from an earlier run is checked.
members=$(cargo metadata --no-deps --locked --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] is not None and "crates-io" not in p["publish"]:
        print("unpublished", p["name"])
    if any("custom-build" in t["kind"] for t in p["targets"]):
        print("build-script", p["name"])')
unpublished=$(awk '$1 == "unpublished" { print $2 }' <<<"$members")
with_build_script=$(awk '$1 == "build-script" { print $2 }' <<<"$members")
exclude=()
for name in $unpublished; do exclude+=(--exclude "$name"); done
say "not published (skipped): $(echo $unpublished)"
rm -rf "$target/package"
say "packaging the published crates"
# Offline first: cargo resolves each package's lockfile from the registry's index, which it otherwise fetches
# again for every package (80 s of a 2-core machine's run, against 5 s offline, with byte-identical .crate
# files); the build that ran before has the index entries the lockfile names in cargo's cache. When some are
# missing (nothing was built yet), the packaging runs again online.
if ! cargo package --workspace "${exclude[@]}" --no-verify --locked --allow-dirty --offline --target-dir "$target"; then
  say "packaging offline failed (above): again, online"
  rm -rf "$target/package"
  cargo package --workspace "${exclude[@]}" --no-verify --locked --allow-dirty --target-dir "$target"
fi

shopt -s nullglob
tarballs=("$target"/package/*.crate)
shopt -u nullglob
[ "${#tarballs[@]}" -gt 0 ] || fail "cargo package wrote no .crate file under $target/package"

# 2. Unpack each .crate into the throwaway workspace (a .crate is a gzipped tar of NAME-VERSION/).
ws=$work/ws
mkdir "$ws"
names=()
dirs=()
for tarball in "${tarballs[@]}"; do
  dir=$(basename "$tarball" .crate)
  tar --extract --gzip --file "$tarball" --directory "$ws"
  [ -f "$ws/$dir/Cargo.toml" ] || fail "$(basename "$tarball") has no $dir/Cargo.toml"
  # The crate's name, from the normalized manifest's [package] table.
  name=$(sed -n '/^\[package\]/,/^\[/ s/^name = "\(.*\)"$/\1/p' "$ws/$dir/Cargo.toml" | head -n 1)
  [ -n "$name" ] || fail "no package name in $dir/Cargo.toml"
  # A build script left out of the package is not an error to cargo: it warns, writes `build = false` in the
  # packaged manifest, and the package compiles without the script, which may then build something else
  # or nothing (toolgate-local's only sets a cfg for its tests). Refused here.
  if grep -qx "$name" <<<"$with_build_script" &&
    ! grep -q '^build = "' <<<"$(sed -n '/^\[package\]/,/^\[/p' "$ws/$dir/Cargo.toml")"; then
    fail "$name has a build script, but its package does not (left out by include/exclude?)"
  fi
  names+=("$name")
  dirs+=("$dir")
done
say "packaged: ${names[*]}"

# The workspace: every unpacked crate a member, and a patch for each crate that a sibling depends on
# (a patch nobody uses only draws a warning on every command). Packaged manifests name each dependency
# in a table of its own: [dependencies.NAME], [dev-dependencies.NAME], [target.'cfg(..)'.dependencies.NAME].
{
  echo '[workspace]'
  echo 'resolver = "3"'
  echo 'members = ['
  for dir in "${dirs[@]}"; do echo "  \"$dir\","; done
  echo ']'
  echo
  echo '[patch.crates-io]'
  for i in "${!names[@]}"; do
    if grep -qE "^\[(.*\.)?(dependencies|dev-dependencies|build-dependencies)\.${names[$i]}\]$" "$ws"/*/Cargo.toml; then
      echo "${names[$i]} = { path = \"${dirs[$i]}\" }"
    fi
  done
  # The repository's profiles, with the shared target (see the top).
  if [ "$shared_target" = 1 ]; then
    python3 - "$root/Cargo.toml" <<'PY'
import json, sys, tomllib
with open(sys.argv[1], "rb") as f:
    profiles = tomllib.load(f).get("profile", {})
def key(k):
    return k if k.replace("-", "").replace("_", "").isalnum() else json.dumps(k)
def table(path, entries):
    values = {k: v for k, v in entries.items() if not isinstance(v, dict)}
    if values or len(values) == len(entries):
        print()
        print("[" + ".".join(key(p) for p in path) + "]")
        for k, v in values.items():
            print(f"{key(k)} = {json.dumps(v)}")
    for k, v in entries.items():
        if isinstance(v, dict):
            table(path + [k], v)
for name, entries in profiles.items():
    table(["profile", name], entries)
PY
  fi
} >"$ws/Cargo.toml"

# 3. The lockfile. The repository's Cargo.lock also lists the unpublished crates (bench, book, testkit, the
# example) and what only they use; cargo takes it as it is with `--locked` (entries nothing uses are no
# reason to refuse it).
# Should it ever need to change it (a packaged manifest that differs from the workspace's in what it
# resolves), `--locked` would refuse: then cargo resolves once without it, keeping every locked version it
# still needs, the result is checked to add or change no entry (only to drop some), and the checks run
# with `--locked` on that.
cp "$root/Cargo.lock" "$ws/Cargo.lock"
# One "name version source" line per [[package]] entry of a Cargo.lock (source empty for a path crate).
lock_entries() {
  awk '/^\[\[package\]\]/ { if (n != "") print n, v, s; n = v = s = "" }
       /^name = / { n = $3 } /^version = / { v = $3 } /^source = / { s = $3 }
       END { if (n != "") print n, v, s }' "$1" | sort
}
if (cd "$ws" && cargo metadata --locked --format-version 1 >/dev/null 2>&1); then
  say "the repository's Cargo.lock resolves the packaged crates unchanged"
else
  (cd "$ws" && cargo metadata --format-version 1 >/dev/null)
  added=$(comm -13 <(lock_entries "$root/Cargo.lock") <(lock_entries "$ws/Cargo.lock"))
  if [ -n "$added" ]; then
    fail "resolving the packaged crates needs packages the repository's Cargo.lock does not lock:
$added"
  fi
  say "the repository's Cargo.lock, less entries no packaged crate uses, resolves the packaged crates"
fi
# A sibling resolved from a registry means its requirement missed the packaged version.
for name in "${names[@]}"; do
  if lock_entries "$ws/Cargo.lock" | awk -v n="\"$name\"" '$1 == n && $3 != "" { found = 1 } END { exit !found }'; then
    fail "$name is resolved from a registry, not from its package (a version requirement missing $name's version?)"
  fi
done

# The repository's [env] table (see the top), with the shared target only: in $work, above the workspace, so
# the sums below do not see it. A path marked `relative` is made absolute (it was relative to the repository).
if [ "$shared_target" = 1 ] && [ -f "$root/.cargo/config.toml" ]; then
  mkdir -p "$work/.cargo"
  python3 - "$root" >"$work/.cargo/config.toml" <<'PY'
import json, os, sys, tomllib
root = sys.argv[1]
with open(os.path.join(root, ".cargo", "config.toml"), "rb") as f:
    env = tomllib.load(f).get("env", {})
print("[env]")
for key, value in env.items():
    if isinstance(value, dict):
        if value.pop("relative", False):
            value["value"] = os.path.join(root, value["value"])
        value = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + " }"
    else:
        value = json.dumps(value)
    print(f"{json.dumps(key)} = {value}")
PY
fi

# 4. Check each crate alone, all into one target directory, then compare the sources with the tarballs'.
# With the shared target, compiling llama.cpp again means a check missed the workspace's build (see the top):
# not an error, but said at the end, with the crates whose checks did it.
sums() { (cd "$ws" && find "${dirs[@]}" -type f -print0 | sort -z | xargs -0 sha256sum); }
sums >"$work/before"
recompiled=()
for name in "${names[@]}"; do
  say "cargo check -p $name (alone, its own features)"
  if ! (cd "$ws" && cargo check -p "$name" --locked --target-dir "$target") 2>&1 | tee "$work/check.log"; then
    fail "$name, as packaged, does not compile alone (above): a file left out of its package, or a feature
of a dependency it uses that only a sibling turns on?"
  fi
  if grep -qE '^ *Compiling llama-cpp-sys-2 ' "$work/check.log"; then recompiled+=("$name"); fi
done
sums >"$work/after"
if ! diff -u "$work/before" "$work/after" >&2; then
  fail "compiling modified the packaged sources (above)"
fi
if [ "$shared_target" = 1 ] && [ "${#recompiled[@]}" -gt 0 ]; then
  say "NOTICE: llama.cpp's build script ran again in the checks of ${recompiled[*]}: the build did not reuse the
workspace's (minutes lost): the features or the profile of its build dependencies differ between the workspace
and a crate checked alone (docs/src/testing.md, \"llama.cpp in the package check\", tells how to find which)."
fi
say "ok: ${#names[@]} crates package and compile alone"
