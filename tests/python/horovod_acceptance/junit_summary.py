"""Counts of a multi-rank pytest run from each rank's JUnit report, for the
Horovod acceptance runners: one line per rank (with the failing cases), then
NAME's summary from rank 0's report.
Usage: junit_summary.py REPORTS_DIR NP NAME"""

import os
import sys
import xml.etree.ElementTree as ET


def main():
    reports, np, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    summary = f"{name}: no report from rank 0"
    for r in range(np):
        path = os.path.join(reports, f"rank-{r}.xml")
        if not os.path.exists(path):
            print(f"rank {r}: no report")
            continue
        s = ET.parse(path).getroot()
        s = s if s.tag == "testsuite" else s.find("testsuite")
        t, f, e, sk = (int(s.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
        fails = [
            c.get("name")
            for c in s.iter("testcase")
            if c.find("failure") is not None or c.find("error") is not None
        ]
        print(
            f"rank {r}: passed={t - f - e - sk} failed={f} skipped={sk} errors={e} {' '.join(fails)}"
        )
        if r == 0:
            summary = (
                f"{name}: ranks={np} passed={t - f - e - sk} failed={f} skipped={sk} errors={e}"
            )
    print(summary)


if __name__ == "__main__":
    main()
