#!/usr/bin/env python3
"""Checks a served APKINDEX.tar.gz the way apk does, independently of Packyard's Rust code.

usage: apk_verify.py <APKINDEX.tar.gz> <public key (SPKI PEM)> <key file name> <dir of served .apk files>

- the index is exactly two gzip members;
- the first is a ustar tar of `.SIGN.RSA.<key file name>` entries (one per key that signs: two
  during a key rotation's overlap) without end-of-archive blocks; apk uses the one of the key it
  trusts (`key file name` here), and `openssl dgst -sha1 -verify` accepts its content as the signature of the raw bytes
  of the second member;
- the second is a tar holding DESCRIPTION and APKINDEX;
- every record reads as apk-tools reads one: each line `X:value` (a line without it makes apk
  refuse the whole index), P:, V: and C: present, no upper-case field apk does not know (the
  package would be uninstallable), a version and dependency tokens in apk's grammar (a bad one
  is cut off or breaks the package), numbers where apk reads numbers;
- for every record, the served package's size is S: and the SHA-1 of its raw control member
  (the gzip member holding .PKGINFO) is C:.
Prints a JSON summary on success; exits non-zero with a message otherwise.
"""
import base64
import hashlib
import re
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zlib


def fail(msg):
    sys.stderr.write(msg + "\n")
    sys.exit(1)


def gzip_members(data):
    members, pos = [], 0
    while pos < len(data):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        d.decompress(data[pos:])
        if not d.eof:
            fail("truncated gzip member at offset %d" % pos)
        used = len(data) - pos - len(d.unused_data)
        members.append(data[pos:pos + used])
        pos += used
    return members


VERSION = r"[0-9]+(\.[0-9]+)*[a-z]?(_(alpha|beta|pre|rc|cvs|svn|git|hg|p)[0-9]*)*(-r[0-9]+)?"
DEPENDENCY = re.compile(r"^!?[A-Za-z0-9/][A-Za-z0-9+._:/,\[\]-]*((<|<=|=|>=|>|~|=~)" + VERSION + r")?$")
KNOWN_UPPER = set("CPVASITULD")


def check_record(block):
    """apk-tools' reading of one APKINDEX record; the reason it would not take it, or None."""
    rec = {}
    for line in block.split("\n"):
        if len(line) < 2 or line[1] != ":" or not line[0].isalpha():
            return "line %r is not X:value (apk refuses the whole index)" % line[:60]
        k, v = line[0], line[2:]
        if k.isupper() and k not in KNOWN_UPPER:
            return "field %s is unknown to apk (the package would be uninstallable)" % k
        if k in "SItk" and not re.fullmatch(r"[0-9]+", v):
            return "%s:%r is not a number" % (k, v)
        if k in "Dpir":
            for token in v.split(" "):
                if not DEPENDENCY.match(token):
                    return "%s: token %r is not a dependency apk reads" % (k, token)
        rec[k] = v
    for k in "PVC":
        if k not in rec:
            return "no %s: line" % k
    if not re.fullmatch(VERSION, rec["V"]):
        return "V:%r is not an apk version" % rec["V"]
    return None


def tar_files(raw_tar):
    out = {}
    with tarfile.open(fileobj=io.BytesIO(raw_tar), mode="r:") as t:
        for m in t.getmembers():
            if m.isfile():
                out[m.name] = t.extractfile(m).read()
    return out


def main():
    index_path, pub_path, key_name, pkg_dir = sys.argv[1:5]
    index = open(index_path, "rb").read()
    members = gzip_members(index)
    if len(members) != 2:
        fail("expected 2 gzip members, found %d" % len(members))
    sig_tar = zlib.decompress(members[0], 16 + zlib.MAX_WBITS)
    if sig_tar[257:263] != b"ustar\x00":
        fail("signature member header lacks ustar magic")
    if len(sig_tar) % 512 or sig_tar[-512:] == b"\0" * 512:
        fail("signature member must end right after its files (no end-of-archive blocks)")
    sigs = tar_files(sig_tar)
    want = ".SIGN.RSA." + key_name
    if not sigs or any(not n.startswith(".SIGN.RSA.") or "/" in n for n in sigs):
        fail("signature member holds %r, expected .SIGN.RSA.<key file name> entries" % list(sigs))
    # apk skips the signatures of keys it does not trust and uses one whose key it has: the
    # client here trusts `key_name` alone.
    if want not in sigs:
        fail("signature member holds %r, none by %r" % (list(sigs), want))
    with tempfile.TemporaryDirectory() as tmp:
        sig_file, data_file = os.path.join(tmp, "sig"), os.path.join(tmp, "index.gz")
        open(sig_file, "wb").write(sigs[want])
        open(data_file, "wb").write(members[1])
        r = subprocess.run(["openssl", "dgst", "-sha1", "-verify", pub_path, "-signature", sig_file, data_file],
                           capture_output=True, text=True)
        if r.returncode != 0 or "Verified OK" not in r.stdout:
            fail("openssl does not verify the index signature: %s %s" % (r.stdout, r.stderr))
    index_tar = zlib.decompress(members[1], 16 + zlib.MAX_WBITS)
    if index_tar[257:263] != b"ustar\x00":
        fail("index member header lacks ustar magic")
    files = tar_files(index_tar)
    if sorted(files) != ["APKINDEX", "DESCRIPTION"]:
        fail("index member holds %r" % sorted(files))
    records = []
    for block in files["APKINDEX"].decode().split("\n\n"):
        if not block.strip():
            continue
        block = block.strip("\n")
        why = check_record(block)
        if why:
            fail("a record apk would not read: %s\n%s" % (why, block))
        rec = {}
        for line in block.split("\n"):
            k, _, v = line.partition(":")
            rec[k] = v
        records.append(rec)
    packages = []
    for rec in records:
        name = "%s-%s.apk" % (rec["P"], rec["V"])
        data = open(os.path.join(pkg_dir, name), "rb").read()
        if int(rec["S"]) != len(data):
            fail("%s: S:%s but the served file has %d bytes" % (name, rec["S"], len(data)))
        control = None
        for m in gzip_members(data):
            try:
                if ".PKGINFO" in tar_files(zlib.decompress(m, 16 + zlib.MAX_WBITS)):
                    control = m
                    break
            except tarfile.TarError:
                continue
        if control is None:
            fail("%s: no control member" % name)
        c = "Q1" + base64.b64encode(hashlib.sha1(control).digest()).decode()
        if rec["C"] != c:
            fail("%s: C:%s but the control member hashes to %s" % (name, rec["C"], c))
        packages.append([rec["P"], rec["V"], rec["A"]])
    print(json.dumps({"description": files["DESCRIPTION"].decode(), "packages": packages,
                      "fields": [list(r.keys()) for r in records]}))


main()
