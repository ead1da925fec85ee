"""``lammer release``: signed release manifests (``contract.manifest``).

* ``lammer release keygen --out PREFIX``: a new Ed25519 key, ``PREFIX.key`` (private, mode
  0600, kept by the release holder) and ``PREFIX.pub`` (shipped to the floor);
* ``lammer release manifest --key KEY --out FILE [--root DIR]``: the components' SHA-256s of
  the installed lammer (or of the tree at ``DIR``) and the whole's digest, signed;
* ``lammer release verify FILE --key PUB...``: the manifest's signature checked against the
  approved keys; a bad signature or an unknown key is refused with a sentence (status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from contract.manifest import (
    ManifestError,
    generate_key,
    load_manifest,
    load_private_key,
    make_manifest,
    public_keys,
)
from contract.software import SoftwareError, components, installed_root
from contract.vocabulary import lammer_version


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``lammer release``."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    keygen = sub.add_parser("keygen", help="a new Ed25519 signing key: PREFIX.key, PREFIX.pub")
    keygen.add_argument(
        "--out", type=Path, required=True, metavar="PREFIX", help="writes PREFIX.key, PREFIX.pub"
    )
    manifest = sub.add_parser("manifest", help="the signed manifest of the installed release")
    manifest.add_argument("--key", type=Path, required=True, help="the private key (PEM)")
    manifest.add_argument("--out", type=Path, required=True, help="the manifest file to write")
    manifest.add_argument("--root", type=Path, default=None, help="another installed tree")
    manifest.add_argument(
        "--version",
        dest="release_version",
        default=None,
        help="the release's version (default: the installed lammer's)",
    )
    verify = sub.add_parser("verify", help="check a manifest's signature against approved keys")
    verify.add_argument("manifest", type=Path, help="the manifest file")
    verify.add_argument(
        "--key",
        type=Path,
        action="append",
        required=True,
        metavar="PUB",
        help="an approved public key (PEM) (repeatable)",
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as stream:
        stream.write(data)


def run(args: argparse.Namespace) -> int:
    """Run the chosen action; a sentence and status 1 (refused) or 2 (unusable input)."""
    try:
        if args.action == "keygen":
            private, public = generate_key()
            key_path, pub_path = Path(f"{args.out}.key"), Path(f"{args.out}.pub")
            _write(key_path, private, 0o600)
            _write(pub_path, public, 0o644)
            print(f"wrote {key_path} (keep it secret) and {pub_path} (for the floor)")
            return 0
        if args.action == "manifest":
            key = load_private_key(args.key)
            root = args.root if args.root is not None else installed_root()
            parts = components(root)
            version = args.release_version or lammer_version()
            manifest = make_manifest(parts, version, key)
            text = json.dumps(manifest, indent=1) + "\n"
            args.out.write_text(text, encoding="utf-8")
            print(
                f"wrote {args.out}: lammer {version}, {len(parts)} components, "
                f"digest {manifest['digest']}, key {manifest['key']}"
            )
            return 0
        keys = public_keys(args.key)
    except FileExistsError as exc:
        print(f"lammer release: {exc.filename} exists: not overwritten", file=sys.stderr)
        return 2
    except (SoftwareError, ManifestError, OSError) as exc:
        print(f"lammer release: {exc}", file=sys.stderr)
        return 2
    try:
        manifest_ok = load_manifest(args.manifest, keys)
    except ManifestError as exc:
        print(f"lammer release: {exc}", file=sys.stderr)
        return 1
    print(
        f"{args.manifest}: lammer {manifest_ok.version}, {len(manifest_ok.components)} "
        f"components, digest {manifest_ok.digest}, signed by key {manifest_ok.key}: valid"
    )
    return 0
