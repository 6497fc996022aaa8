"""The official OpenAI Python SDK against a running homed (run by tests/openai_api.rs).

Usage: client.py BASE_URL API_KEY
Prints one JSON object with what the SDK saw; the Rust test asserts on it. Every call
goes through the SDK's own request building, SSE parsing and error mapping.
"""

import json
import sys

import openai


def main() -> None:
    base_url, api_key = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
    out = {"sdk_version": openai.__version__}

    out["models"] = [m.id for m in client.models.list()]

    r = client.chat.completions.create(
        model="homeagent",
        messages=[
            {"role": "system", "content": "ignored by the agent"},
            {"role": "user", "content": "hello from the python sdk"},
        ],
        temperature=0.3,
    )
    out["plain"] = {
        "object": r.object,
        "model": r.model,
        "content": r.choices[0].message.content,
        "finish_reason": r.choices[0].finish_reason,
        "tool_calls": r.choices[0].message.tool_calls,
        "total_tokens": r.usage.total_tokens if r.usage else None,
    }

    chunks = []
    finish = None
    usage = None
    with client.chat.completions.create(
        model="homeagent",
        messages=[{"role": "user", "content": "stream this please"}],
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage.total_tokens
            for c in chunk.choices:
                if c.delta.tool_calls:
                    out.setdefault("leaked_tool_calls", []).append(str(c.delta.tool_calls))
                if c.delta.content:
                    chunks.append(c.delta.content)
                if c.finish_reason:
                    finish = c.finish_reason
    out["stream"] = {"chunks": chunks, "text": "".join(chunks), "finish_reason": finish, "total_tokens": usage}

    # The agent's own tool call (memory_recall) stays inside the agent.
    tool_chunks = []
    for chunk in client.chat.completions.create(
        model="homeagent",
        messages=[{"role": "user", "content": 'call-tool memory_recall {"query_intent":"peanuts"}'}],
        stream=True,
    ):
        for c in chunk.choices:
            if c.delta.tool_calls:
                out.setdefault("leaked_tool_calls", []).append(str(c.delta.tool_calls))
            if c.delta.content:
                tool_chunks.append(c.delta.content)
    out["tool_stream"] = "".join(tool_chunks)

    try:
        openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
        out["wrong_key"] = "accepted"
    except openai.AuthenticationError as e:
        out["wrong_key"] = {"status": e.status_code, "message": e.message}

    try:
        client.chat.completions.create(model="homeagent", messages=[{"role": "user", "content": "two"}], n=2)
        out["n2"] = "accepted"
    except openai.BadRequestError as e:
        out["n2"] = {"status": e.status_code, "param": e.param, "message": e.message}

    print(json.dumps(out))


if __name__ == "__main__":
    main()
