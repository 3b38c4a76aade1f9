#!/bin/sh
# mmdebstrap customize hook: removes what installing writes from the clock or the host rather
# than from the packages, so two builds give the same root. $1 is the root.
set -eu
root=$1
rm -f "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old "$root"/etc/*-
rm -rf "$root"/var/log/* "$root"/var/cache/ldconfig/*
# Java's CA keystore is generated at install with the time in each entry. Nothing here makes a
# TLS call from Java (pdftk reads and writes local files), so it goes; Java then trusts no CA.
rm -f "$root/etc/ssl/certs/java/cacerts"
