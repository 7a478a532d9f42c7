"""Realistic tool outputs the redaction benchmarks scan."""

from __future__ import annotations

import json


def realistic_inputs() -> dict[str, str]:
    """Tool outputs as they come: a 100 KB JSON API response, a YAML document, a log file."""
    import random

    rng = random.Random(7)
    words = [
        "agent",
        "tool",
        "call",
        "result",
        "status",
        "value",
        "items",
        "list",
        "name",
        "created",
        "updated",
        "user",
        "order",
        "payment",
        "invoice",
        "shipment",
        "region",
        "cluster",
        "node",
        "deployment",
        "service",
        "request",
        "response",
    ]

    def sentence(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    items = []
    api = ""
    i = 0
    while len(api) < 100_000:
        items.append(
            {
                "id": f"ord_{rng.getrandbits(48):012x}",
                "customer": {"name": sentence(2).title(), "email": f"user{i}@example.com"},
                "status": rng.choice(["paid", "pending", "refunded"]),
                "amount": round(rng.random() * 500, 2),
                "created_at": "2026-11-30T12:34:56Z",
                "sha": f"{rng.getrandbits(160):040x}",
                "url": f"https://api.example.com/v1/orders/{i}",
                "notes": sentence(12),
            }
        )
        i += 1
        api = json.dumps({"data": items, "has_more": True})
    yaml_doc = "".join(
        f"  - name: service-{k}\n    image: ghcr.io/acme/service-{k}:1.{k}.0\n"
        f"    replicas: {k % 5 + 1}\n    env:\n      LOG_LEVEL: info\n"
        f"      REGION: eu-west-{k % 3 + 1}\n    description: {sentence(10)}\n"
        for k in range(400)
    )
    yaml_doc = "services:\n" + yaml_doc[:60_000]
    log = "".join(
        f"2026-11-30T12:{k // 60 % 60:02d}:{k % 60:02d}Z INFO "
        f"request_id={rng.getrandbits(64):016x} method=GET path=/api/items/{k} status=200 "
        f'duration_ms={rng.randint(2, 900)} user_agent=curl/8.4.0 msg="{sentence(6)}"\n'
        for k in range(700)
    )
    return {"json_api_100kb": api[:100_000], "yaml_doc": yaml_doc, "log_file": log}
