"""tls_audit.sh's summary: issue 9's criteria judged from testssl.sh's flat JSON findings."""
import json

from benchlib import table

OLD_PROTOCOLS = ["SSLv2", "SSLv3", "TLS1", "TLS1_1"]
WEAK_CIPHER_LISTS = {"cipherlist_NULL": "NULL", "cipherlist_aNULL": "anonymous", "cipherlist_EXPORT": "export",
                     "cipherlist_LOW": "LOW (DES, RC2, RC4, 64 bit)", "cipherlist_3DES_IDEA": "3DES / IDEA",
                     "cipherlist_AVERAGE": "obsolete CBC"}
VULNERABILITIES = ["heartbleed", "CCS", "ticketbleed", "ROBOT", "secure_renego", "secure_client_renego", "CRIME_TLS",
                   "BREACH", "POODLE_SSL", "fallback_SCSV", "SWEET32", "FREAK", "DROWN", "LOGJAM",
                   "LOGJAM-common_primes", "BEAST", "LUCKY13", "RC4"]
# Findings about the run's own self-signed, 2-day test certificate or the application's HTTP
# headers, not about sluice's TLS settings; listed apart.
CERT_IDS = ("cert", "DNS_CAArecord", "OCSP_stapling", "certificate_transparency")
HEADER_IDS = ("HSTS", "HPKP", "security_headers", "banner_", "cookie_")
ABOVE_INFO = ("LOW", "MEDIUM", "HIGH", "CRITICAL", "WARN")


def judge(findings):
    by_id = {f["id"]: f for f in findings}

    def get(i):
        return by_id.get(i, {"finding": "(not tested)", "severity": "?"})

    rows = []
    for p in OLD_PROTOCOLS:
        f = get(p)
        rows.append([f"protocol {p} not offered", f["finding"], f["finding"].startswith("not offered")])
    for i, name in WEAK_CIPHER_LISTS.items():
        f = get(i)
        rows.append([f"{name} suites not offered", f["finding"], f["finding"].startswith("not offered")])
    offered = [f for f in findings if f["id"].startswith("cipher_x")]
    fs = get("PFS")
    no_fs = [f["finding"] for f in offered if "ECDH" not in f["finding"] and " DH " not in f["finding"]]
    rows.append([f"forward secrecy on every suite ({len(offered)} offered)",
                 f"PFS: {fs['finding']}; without (EC)DHE: {len(no_fs)}", bool(offered) and not no_fs
                 and fs["severity"] == "OK"])
    cbc = [f["finding"] for f in offered if "GCM" not in f["finding"] and "ChaCha20" not in f["finding"]
           and "CCM" not in f["finding"]]
    rows.append(["every offered suite AEAD (no CBC)", f"non-AEAD: {len(cbc)}", bool(offered) and not cbc])
    for v in VULNERABILITIES:
        f = get(v)
        rows.append([f"not vulnerable: {v}", f["finding"], f["severity"] in ("OK", "INFO")])
    return rows


def summary_tls_audit(rows):
    r = rows[0] if rows else {}
    try:
        findings = json.load(open(r["json"], encoding="utf-8"))
    except (KeyError, OSError, ValueError):
        return rows, "no testssl JSON: " + str(r)
    checks = judge(findings)
    r["criteria_met"] = all(c[2] for c in checks)
    r["criteria_failed"] = [c[0] for c in checks if not c[2]]
    other = [[f["id"], f["severity"], f["finding"][:100],
              "test certificate" if f["id"].startswith(CERT_IDS) else
              "application headers" if f["id"].startswith(HEADER_IDS) else
              "the tool" if f["id"] == "engine_problem" else "sluice TLS"]
             for f in findings if f["severity"] in ABOVE_INFO]
    r["findings_above_info"] = [dict(zip(("id", "severity", "finding", "about"), o)) for o in other]
    info = [[i, by["finding"]] for i in ("TLS_session_ticket", "SSL_sessionID_support", "sessionresumption_ticket",
                                         "sessionresumption_ID", "cipher_order", "PFS_ECDHE_curves", "ALPN")
            for by in findings if by["id"] == i]
    md = (f"testssl exit code {r.get('testssl_rc')}, {r.get('testssl_s')} s; server alive after: "
          f"{r.get('alive_after')}. **All criteria met: {'yes' if r['criteria_met'] else 'NO'}**\n\n"
          + table(["criterion", "testssl's finding", "met"], [[c[0], c[1], "yes" if c[2] else "**NO**"] for c in checks])
          + "\n\nFindings above INFO (what they are about):\n\n"
          + table(["id", "severity", "finding", "about"], other)
          + "\n\nFor information:\n\n" + table(["id", "finding"], info))
    return rows, md
