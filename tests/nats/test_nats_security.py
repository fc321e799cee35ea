"""Security over NATS on a real server: credentials come from the message's NATS headers only, on the per-topic
subjects and the envelope subject alike; an envelope's inner headers never authenticate."""

from __future__ import annotations

import asyncio
import json

import httpx
import nats
import orjson

from svcgen.runtime import Guard, NatsBinding
from svcgen.runtime._nats.subjects import invoke_subject, topic_subject
from tests.support.broker import unique_name
from tests.support.security import Calls, clinic_security, clinic_service, jwks_of, rsa_key, token


def test_nats_faces_enforce_like_http(nats_url: str) -> None:
    key = rsa_key()
    calls = Calls()

    async def scenario() -> None:
        jwks = httpx.MockTransport(lambda request: httpx.Response(200, json=jwks_of(key)))
        guard = Guard(clinic_security(jwks="https://id.test/jwks"), transport=jwks)
        name = unique_name("sec")
        service = clinic_service(guard, calls, name)
        connection = await nats.connect(nats_url)
        binding = NatsBinding(service, connection, stop_timeout=0.5)
        await binding.start()
        try:
            good = {"authorization": f"Bearer {token(key, scope='patients:read')}"}
            payload = b'{"patientId": "p-1"}'
            subject = topic_subject(name, "patients:get")

            async def ask(subject: str, data: bytes, headers: dict[str, str] | None = None) -> dict[str, object]:
                reply = await connection.request(subject, data, timeout=5, headers=headers)
                answer: dict[str, object] = orjson.loads(reply.data)
                return answer

            refused = await ask(subject, payload)
            assert refused["statusCode"] == "unauthorized"
            assert "www-authenticate" in refused["headers"]  # type: ignore[operator]
            forged = {"authorization": f"Bearer {token(rsa_key(), scope='patients:read')}"}
            assert (await ask(subject, payload, forged))["statusCode"] == "unauthorized"
            assert calls.seen == []
            assert (await ask(subject, payload, good))["statusCode"] == "ok"
            inner = {"topic": "patients:get", "headers": good, "body": payload.decode()}
            smuggled = await ask(invoke_subject(name), json.dumps(inner).encode(), {"x-other": "1"})
            assert smuggled["statusCode"] == "unauthorized"
            assert (await ask(invoke_subject(name), json.dumps(inner).encode()))["statusCode"] == "unauthorized"
            outer = {"topic": "patients:get", "body": payload.decode()}
            assert (await ask(invoke_subject(name), json.dumps(outer).encode(), good))["statusCode"] == "ok"
            assert len(calls.seen) == 2
        finally:
            await binding.stop()
            await connection.close()

    asyncio.run(scenario())
