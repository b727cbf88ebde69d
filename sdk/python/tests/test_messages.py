"""Tests of the message types, ``encode`` and ``decode``: protocol/vectors/messages.json and
the rules and error messages around them."""

from __future__ import annotations

import json
import unittest
from collections.abc import Mapping
from typing import Any

from balloon_player import VECTORS, json_equal, load_vector

from memtide_balloon import (
    MAX_LINE_BYTES,
    Bye,
    ErrorCode,
    ErrorMessage,
    Hello,
    MessageToMemtide,
    PoolKind,
    Progress,
    ProgressStatus,
    ProtocolError,
    Stats,
    Target,
    Welcome,
    decode,
    encode,
)

_VECTORS: list[dict[str, Any]] = load_vector(VECTORS / "messages.json")["vectors"]
_BUILDERS = {
    "hello": Hello,
    "stats": Stats,
    "progress": Progress,
    "bye": Bye,
    "error": ErrorMessage,
}


def _build(fields: Mapping[str, Any]) -> MessageToMemtide:
    """The message an agent would build with these JSON fields (strings for enums)."""
    kwargs = {key: value for key, value in fields.items() if key not in ("type", "version")}
    message: MessageToMemtide = _BUILDERS[fields["type"]](**kwargs)
    return message


def _built_from_json(vector: Mapping[str, Any]) -> bool:
    """Whether an invalid to_memtide line is an agent message whose fields an SDK value can
    hold: a JSON object of an agent's type, at version 1 for a hello (the SDK writes that)."""
    try:
        fields = json.loads(vector["line"])
    except ValueError:
        return False
    if not isinstance(fields, dict) or fields.get("type") not in _BUILDERS:
        return False
    return fields["type"] != "hello" or json_equal(fields.get("version"), 1)


def _decode_text(text: str) -> object:
    return decode(text.encode("utf-8"))


class MessageVectorTests(unittest.TestCase):
    def test_every_to_agent_line_decodes_to_its_message_or_fails_with_its_code(self) -> None:
        vectors = [vector for vector in _VECTORS if vector["direction"] == "to_agent"]
        self.assertGreaterEqual(len(vectors), 18)
        for vector in vectors:
            with self.subTest(vector["name"]):
                line = vector["line"].encode("utf-8")
                if vector["valid"]:
                    message = decode(line)
                    self.assertTrue(
                        json_equal(message.to_json(), vector["message"]),
                        f"{message.to_json()} != {vector['message']}",
                    )
                else:
                    with self.assertRaises(ProtocolError) as caught:
                        decode(line)
                    self.assertEqual(caught.exception.code, vector["error"])

    def test_every_valid_to_memtide_message_is_built_and_encoded_as_the_vector_says(
        self,
    ) -> None:
        # The SDK sends no miss-ratio curve (stats.curve is optional): it cannot build one. Nor
        # durability figures (stats.durability is optional): only a database has them, and
        # memtide-adapter sends a MariaDB's.
        vectors = [
            vector
            for vector in _VECTORS
            if vector["direction"] == "to_memtide"
            and vector["valid"]
            and "curve" not in vector["message"]
            and "durability" not in vector["message"]
        ]
        self.assertGreaterEqual(len(vectors), 15)
        for vector in vectors:
            with self.subTest(vector["name"]):
                line = encode(_build(vector["message"]))
                self.assertTrue(line.endswith(b"\n"))
                self.assertNotIn(b"\n", line[:-1])
                encoded = json.loads(line)
                self.assertTrue(
                    json_equal(encoded, vector["message"]), f"{encoded} != {vector['message']}"
                )

    def test_invalid_to_memtide_messages_cannot_be_built(self) -> None:
        vectors = [
            vector
            for vector in _VECTORS
            if vector["direction"] == "to_memtide" and not vector["valid"]
        ]
        built = [vector for vector in vectors if _built_from_json(vector)]
        self.assertGreaterEqual(len(built), 30)
        for vector in built:
            with self.subTest(vector["name"]), self.assertRaises((ValueError, TypeError)):
                _build(json.loads(vector["line"]))


class DecodeTests(unittest.TestCase):
    def test_bad_field_names_the_field_and_its_value(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            _decode_text('{"type":"target","seq":1,"pool_bytes":4096.5,"deadline_ms":30000}')
        self.assertEqual(caught.exception.code, ErrorCode.BAD_FIELD)
        self.assertEqual(
            caught.exception.message,
            "target.pool_bytes = 4096.5: not an integer in [0, 9007199254740991]",
        )

    def test_missing_field_is_bad_field_naming_it(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            _decode_text('{"type":"target","seq":1,"pool_bytes":4096}')
        self.assertEqual(caught.exception.code, ErrorCode.BAD_FIELD)
        self.assertEqual(caught.exception.message, "target.deadline_ms is missing")

    def test_true_is_not_an_integer(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            _decode_text('{"type":"target","seq":true,"pool_bytes":4096,"deadline_ms":1}')
        self.assertEqual(caught.exception.code, ErrorCode.BAD_FIELD)
        self.assertIn("target.seq = true", caught.exception.message)

    def test_integer_of_thousands_of_digits_is_bad_field(self) -> None:
        digits = "9" * 5000
        with self.assertRaises(ProtocolError) as caught:
            _decode_text(f'{{"type":"target","seq":1,"pool_bytes":{digits},"deadline_ms":1}}')
        self.assertEqual(caught.exception.code, ErrorCode.BAD_FIELD)

    def test_nan_is_malformed(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            _decode_text('{"type":"target","seq":1,"pool_bytes":NaN,"deadline_ms":1}')
        self.assertEqual(caught.exception.code, ErrorCode.MALFORMED)

    def test_deeply_nested_json_is_malformed(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            decode(b"[" * 30_000 + b"]" * 30_000)
        self.assertEqual(caught.exception.code, ErrorCode.MALFORMED)

    def test_bytes_that_are_not_utf8_are_malformed(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            decode(b'{"type":"bye","reason":"\xff"}')
        self.assertEqual(caught.exception.code, ErrorCode.MALFORMED)
        self.assertIn("not UTF-8", caught.exception.message)

    def test_a_lone_surrogate_escape_is_bad_field(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            _decode_text('{"type":"bye","reason":"\\ud800"}')
        self.assertEqual(caught.exception.code, ErrorCode.BAD_FIELD)

    def test_a_json_array_is_malformed_and_says_so(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            _decode_text("[1,2,3]")
        self.assertEqual(caught.exception.message, "the line is a JSON array, not an object")

    def test_a_message_agents_send_is_unknown_to_an_agent(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            _decode_text('{"type":"stats"}')
        self.assertEqual(caught.exception.code, ErrorCode.UNKNOWN_TYPE)
        self.assertIn("agents send it", caught.exception.message)

    def test_one_trailing_carriage_return_is_ignored(self) -> None:
        self.assertEqual(_decode_text('{"type":"bye"}\r'), Bye())

    def test_line_of_65536_bytes_with_its_newline_is_read_and_a_longer_one_is_too_long(
        self,
    ) -> None:
        padding = MAX_LINE_BYTES - 1 - len('{"type":"bye","pad":""}')
        line = ('{"type":"bye","pad":"' + "p" * padding + '"}').encode("utf-8")
        self.assertEqual(len(line) + 1, MAX_LINE_BYTES)
        self.assertEqual(decode(line), Bye())
        with self.assertRaises(ProtocolError) as caught:
            decode(line[:-2] + b'p"}')
        self.assertEqual(caught.exception.code, ErrorCode.TOO_LONG)

    def test_error_from_memtide_with_a_code_of_no_version_1_is_bad_field(self) -> None:
        with self.assertRaises(ProtocolError) as caught:
            _decode_text('{"type":"error","code":"tired","message":"later","fatal":false}')
        self.assertEqual(caught.exception.code, ErrorCode.BAD_FIELD)
        self.assertIn("tired", str(caught.exception))

    def test_decoded_error_code_compares_equal_to_its_error_code(self) -> None:
        message = _decode_text('{"type":"error","code":"busy","message":"x","fatal":true}')
        assert isinstance(message, ErrorMessage)
        self.assertEqual(message.code, ErrorCode.BUSY)
        self.assertEqual(message, ErrorMessage(ErrorCode.BUSY, "x", True))


class BuildTests(unittest.TestCase):
    def test_hello_says_which_rule_it_breaks(self) -> None:
        with self.assertRaises(ValueError) as caught:
            Hello("mariadb", PoolKind.BUFFER_POOL, 4242, 8 << 30, 9_000_000_000, 8 << 30, 1 << 20)
        self.assertEqual(
            str(caught.exception), "hello.min_bytes = 9000000000 > max_bytes = 8589934592"
        )

    def test_hello_refuses_an_unknown_kind_listing_the_kinds(self) -> None:
        with self.assertRaises(ValueError) as caught:
            Hello("db", "disk", 1, 0, 0, 0, 1)  # type: ignore[arg-type]
        self.assertEqual(
            str(caught.exception),
            'hello.kind = "disk": not one of buffer_pool, heap, cache, other',
        )

    def test_enum_fields_given_as_strings_become_members(self) -> None:
        progress = Progress(1, 0, "done")  # type: ignore[arg-type]
        self.assertIs(progress.status, ProgressStatus.DONE)

    def test_stats_refuses_more_dirty_than_the_pool(self) -> None:
        with self.assertRaises(ValueError) as caught:
            Stats(pool_bytes=10, used_bytes=5, hits=0, misses=0, evictions=0, dirty_bytes=11)
        self.assertEqual(str(caught.exception), "stats.dirty_bytes = 11 > pool_bytes = 10")

    def test_welcome_refuses_dead_after_shorter_than_the_stats_interval(self) -> None:
        with self.assertRaises(ValueError) as caught:
            Welcome("db", 1000, 500)
        self.assertEqual(
            str(caught.exception), "welcome.dead_after_ms = 500 < stats_interval_ms = 1000"
        )

    def test_reason_over_1024_bytes_of_utf8_is_refused(self) -> None:
        Progress(1, 0, ProgressStatus.FAILED, "é" * 512)
        with self.assertRaises(ValueError) as caught:
            Progress(1, 0, ProgressStatus.FAILED, "é" * 513)
        self.assertEqual(str(caught.exception), "progress.reason is 1026 bytes long, over 1,024")

    def test_encode_writes_compact_utf8_json_with_the_type_first(self) -> None:
        line = encode(Bye("café"))
        self.assertEqual(line, '{"type":"bye","reason":"café"}\n'.encode())

    def test_encode_refuses_a_line_over_65536_bytes(self) -> None:
        with self.assertRaises(ValueError) as caught:
            encode(ErrorMessage(ErrorCode.MALFORMED, "x" * MAX_LINE_BYTES, False))
        self.assertIn("over 65,536", str(caught.exception))

    def test_target_encodes_as_memtide_would_send_it(self) -> None:
        self.assertEqual(
            Target(1, 6 << 30, 30_000).to_json(),
            {"type": "target", "seq": 1, "pool_bytes": 6 << 30, "deadline_ms": 30_000},
        )


if __name__ == "__main__":
    unittest.main()
