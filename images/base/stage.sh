# The base of the render-pod and renderpool-operator images, distroless style (sourced, not run):
# the distroless users (nonroot = 65532), an empty /tmp for a mount, and from the pinned Debian
# packages only the shared libraries the given ELF files need, found by walking their NEEDED
# entries and program interpreter, the root certificates as one bundle, plus those packages'
# copyright files and a status.d entry each so that image scanners see the versions.

base_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# base_inputs: the files the base layer is made from (for the image's cache key).
base_inputs() { printf '%s\n' "$base_dir/"{stage.sh,packages.lock,passwd,group,nsswitch.conf}; }

_elf_needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }
_elf_interp() { readelf -l "$1" | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p'; }

# The newest GLIBC_x.y symbol version an ELF file asks for.
_elf_glibc() { objdump -T "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1; }

# _copy_path FROM TO PATH: copies PATH (absolute inside FROM) into TO, following symlinks and
# copying every link on the way so the same names resolve inside the image.
_copy_path() {
  local from=$1 to=$2 path=$3 target
  while :; do
    mkdir -p "$to$(dirname "$path")"
    cp -a "$from$path" "$to$path"
    [ -L "$from$path" ] || return 0
    target=$(readlink "$from$path")
    case $target in /*) path=$target ;; *) path=$(dirname "$path")/$target ;; esac
    path=$(realpath -m -s "$path")
  done
}

# base_stage REPO DIR ELF...: stages the base into DIR from the .deb files in REPO (fetched by
# fetch-debs.sh from base/packages.lock); ELF files are the binaries and libraries that will
# run on it. Fails naming a library no pinned package provides, and a binary built against a
# newer glibc than the pinned one.
base_stage() {
  local repo=$1 dir=$2; shift 2
  local debs=$dir.debs deb pkg
  rm -rf "$debs"
  mkdir -p "$debs"
  for deb in "$repo"/pool/*.deb; do dpkg-deb -x "$deb" "$debs"; done

  local glibc need
  glibc=$(dpkg-deb -f "$repo"/pool/libc6_*.deb Version | cut -d- -f1)
  for elf; do
    need=$(_elf_glibc "$elf")
    if [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$glibc" | sort -V | tail -n 1)" != "$glibc" ]; then
      echo "base: $elf needs glibc $need, the image has $glibc: build it on an older Debian" >&2
      return 1
    fi
  done

  # Breadth-first over NEEDED entries; the interpreter of each executable too.
  local queue=("$@") seen=" " file lib found d
  while [ ${#queue[@]} -gt 0 ]; do
    file=${queue[0]}; queue=("${queue[@]:1}")
    local interp
    interp=$(_elf_interp "$file")
    if [ -n "$interp" ] && [[ $seen != *" $interp "* ]]; then
      seen+="$interp "
      [ -e "$debs$interp" ] || { echo "base: no pinned package has the interpreter $interp" >&2; return 1; }
      _copy_path "$debs" "$dir" "$interp"
    fi
    for lib in $(_elf_needed "$file"); do
      [[ $seen == *" $lib "* ]] && continue
      seen+="$lib "
      found=
      for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /lib /usr/lib; do
        if [ -e "$debs$d/$lib" ]; then found=$d/$lib; break; fi
      done
      [ -n "$found" ] || {
        echo "base: $file needs $lib, which no package in base/packages.lock provides" >&2
        return 1
      }
      _copy_path "$debs" "$dir" "$found"
      queue+=("$debs$found")
    done
  done

  for deb in "$repo"/pool/*.deb; do
    pkg=$(dpkg-deb -f "$deb" Package)
    # A doc folder may be a link to another package's (libgcc-s1 to gcc-12-base): the file it holds.
    install -D -m 0644 "$(realpath "$debs/usr/share/doc/$pkg/copyright")" "$dir/usr/share/doc/$pkg/copyright"
    mkdir -p "$dir/var/lib/dpkg/status.d"
    dpkg-deb -f "$deb" Package Version Architecture Source Maintainer Homepage Description \
      >"$dir/var/lib/dpkg/status.d/$pkg"
  done
  # The root certificates as the one bundle TLS clients look for, as update-ca-certificates
  # makes it at install (extracting a package runs no install scripts).
  local roots=$debs/usr/share/ca-certificates/mozilla crt
  [ -d "$roots" ] || { echo "base: no root certificates (ca-certificates in base/packages.lock?)" >&2; return 1; }
  mkdir -p "$dir/etc/ssl/certs"
  while IFS= read -r crt; do sed -e '$a\' "$roots/$crt"; done \
    < <(cd "$roots" && find . -name '*.crt' | LC_ALL=C sort) >"$dir/etc/ssl/certs/ca-certificates.crt"
  chmod 0644 "$dir/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$debs"

  install -D -m 0644 "$base_dir/passwd" "$dir/etc/passwd"
  install -D -m 0644 "$base_dir/group" "$dir/etc/group"
  install -D -m 0644 "$base_dir/nsswitch.conf" "$dir/etc/nsswitch.conf"
  install -d -m 1777 "$dir/tmp"
  install -d -m 0700 -o 65532 -g 65532 "$dir/home/nonroot"
  install -d -m 0700 "$dir/root"
  # Directories the copies made get fixed modes, whatever the umask.
  find "$dir" -type d ! -path "$dir/tmp" ! -path "$dir/home/nonroot" ! -path "$dir/root" -exec chmod 0755 {} +
}
