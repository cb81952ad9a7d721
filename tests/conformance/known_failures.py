# Writes tests/conformance/known_failures.txt from the output of `conformance --failures`.
import sys, re
# reads `conformance --failures` output, writes known_failures.txt
lines=open(sys.argv[1]).read().splitlines()
out=[]
infail=False
for l in lines:
    if re.match(r"^failed \(\d+\):", l): infail=True; continue
    if infail:
        if not l.startswith("  "): infail=False; continue
        name, _, detail = l.strip().partition(": ")
        detail = re.sub(r"model '[^']*': ", "", detail)
        detail = detail.replace("\n"," ")
        if len(detail) > 180: detail = detail[:177] + "..."
        out.append(f"{name}  {detail}")
hdr = """# ONNX backend node tests otter fails, one per line: TEST_NAME  REASON (the runner's own message,
# shortened). tests/conformance/conformance.cc counts them as failures; its exit status is 0 when
# exactly these fail, so a regression or a newly passing test shows. Regenerate after a change:
#   build/tests/conformance --failures > /tmp/c.txt; python3 tests/conformance/known_failures.py /tmp/c.txt
"""
path = sys.argv[2] if len(sys.argv) > 2 else "tests/conformance/known_failures.txt"
open(path, "w").write(hdr + "\n".join(out) + "\n")
print(len(out))
