#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Writes the seed corpora under tests/fuzz/corpus/: one well-formed example of each thing a
# target decodes (and a few near misses), laid out as the wire structs of methods/*/…_wire.hpp.
# The seeds are committed; run this again only after a wire format changes.
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def seed(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(HERE, target, name), "wb") as f:
        f.write(data)


# --- tcp (tcp_wire.hpp): dialects first_inbound 0, await_ack 1, await_proof 2, legacy 3,
# standalone 4, v2 5; the choice byte's high nibble picks the unexpected limit (2: 16 KiB).
WIRE, STANDALONE, HELLO = 51903, 51912, 0x48494D42
def legacy(magic, mode, tag, size):
    return struct.pack("<IIqQ", magic, mode, tag, size)
def standalone(mode, tag, size, msg_class):
    return struct.pack("<IIiIQB", STANDALONE, mode, tag, 0, size, msg_class)
def v2(mode, tag, size, cookie):
    return struct.pack("<IIqQQ", WIRE, mode, tag, size, cookie)
seed("tcp_header", "legacy-eager", bytes([0x23]) + legacy(WIRE, 0x4, 7, 100))
seed("tcp_header", "legacy-unexpected", bytes([0x20]) + legacy(WIRE, 0x2, -1, 64))
seed("tcp_header", "legacy-rendezvous", bytes([0x23]) + legacy(WIRE, 0x8, 3, 1 << 20))
seed("tcp_header", "standalone-unexpected", bytes([0x24]) + standalone(0x2, -5, 16, 7))
seed("tcp_header", "standalone-first", bytes([0x20]) + standalone(0x4, 1, 10, 0))
seed("tcp_header", "v2-unexpected", bytes([0x25]) + v2(0x2, 9, 128, 3))
seed("tcp_header", "v2-rts", bytes([0x25]) + v2(0x10, 9, 1 << 30, 42))
seed("tcp_header", "v2-cts", bytes([0x25]) + v2(0x20, 9, 0, 42))
seed("tcp_header", "v2-data", bytes([0x25]) + v2(0x80, 9, 65536, 42))
seed("tcp_header", "hello", bytes([0x20]) + legacy(HELLO, 0x100, 1, 42 + 16))
seed("tcp_header", "hello-ack", bytes([0x21]) + legacy(HELLO, 0x101, 1, 42 + 16 + 32))
seed("tcp_header", "hello-proof", bytes([0x22]) + legacy(HELLO, 0x102, 1, 32))
seed("tcp_header", "oversized", bytes([0x20]) + legacy(WIRE, 0x2, 1, 1 << 40))

def hello_body(features, address, proof=b""):
    return struct.pack("<QH", features, len(address)) + address + bytes(32) + proof
seed("tcp_hello", "plain", b"\0" + hello_body(1, b"tcp://node1:3334"))
seed("tcp_hello", "no-address", b"\0" + hello_body(1, b""))
seed("tcp_hello", "keyed-ack", b"\1" + hello_body(3, b"tcp://[::1]:3334", bytes(range(32))))
seed("tcp_hello", "required", b"\1" + hello_body(5, b""))
# feature_key_ciphers: the cipher byte and the ephemeral key after the nonce, before a proof.
seed("tcp_hello", "cipher-offer", b"\0" + hello_body(0x63, b"tcp://node1:3334") + b"\6" +
     bytes(range(32, 64)))
seed("tcp_hello", "cipher-choice-ack", b"\1" + hello_body(0x63, b"", b"\2" + bytes(range(32)) +
     bytes(range(64, 96))))
seed("tcp_header", "hello-cipher", bytes([0x20]) + legacy(HELLO, 0x100, 1, 42 + 16 + 33))

# --- shm (shm_wire.hpp, shm_ring.hpp)
def record(stamp, type_, tag, slots, aux, size, cookie, payload=b""):
    return struct.pack("<QIiIiQQ", stamp, type_, tag, slots, aux, size, cookie) + payload
# Geometry choice 0: 4 slots of 256 bytes. Position p's stamp is (p + 1) << 1.
ring = record(2, 1, 5, 1, 0, 10, 0, b"0123456789").ljust(256, b"\0")
ring += record(4, 2, 6, 1, 3, 4, 0, b"abcd").ljust(256, b"\0")
ring += record(6, 3, 7, 1, 1, 1 << 20, 99, struct.pack("<QQ", 0x7f0000, 1 << 20)).ljust(256, b"\0")
seed("shm_ring", "three-records", b"\0\0" + ring)
seed("shm_ring", "two-slot-eager", b"\0\0" + record(2, 1, 1, 2, 0, 300, 0, bytes(300)))
seed("shm_ring", "cts-done-nak", b"\1\0" + record(2, 4, 0, 1, 0, 0, 1).ljust(256, b"\0") +
     record(4, 6, 0, 1, 0, 0, 1).ljust(256, b"\0") + record(6, 7, 0, 1, -105, 0, 2))
seed("shm_ring", "bad-slots", b"\0\0" + record(2, 2, 1, 1, 0, 1 << 40, 0))

def shm_hello(slots, size, name, features=0):
    return struct.pack("<IIIIiIQ64sII32s", 0x6c73686d, 6, slots, size, 1234, len(name), 7,
                       name, features, 0, bytes(32))
seed("shm_hello", "named", shm_hello(64, 8192, b"server.0"))
seed("shm_hello", "nameless", shm_hello(4, 256, b""))
seed("shm_hello", "keyed", shm_hello(4096, 1 << 20, b"a-b_c", 1))
seed("shm_hello", "bad-name", shm_hello(64, 8192, b"a/b"))

def region(magic, id_, address, size):
    return struct.pack("<IIQQQ", magic, 0, id_, address, size)
OFFER, WITHDRAW = 0x6f72676e, 0x7772676e
seed("shm_offers", "offer-translate",
     b"\0\0" + region(OFFER, 1, 0x10000, 4096) +
     b"\2\2" + struct.pack("<QQQQ", 0x10000, 100, 0x10100, 3996))
seed("shm_offers", "offer-withdraw",
     b"\0\1" + region(OFFER, 2, 0x20000, 8192) + b"\1" + region(WITHDRAW, 2, 0x20000, 8192) +
     b"\2\1" + struct.pack("<QQ", 0x20000, 1))
seed("shm_offers", "overlap",
     b"\0\0" + region(OFFER, 1, 0x10000, 4096) + b"\0\0" + region(OFFER, 3, 0x10800, 4096) +
     b"\2\1" + struct.pack("<QQ", 0x10f00, 0x200))

# --- verbs (verbs_wire.hpp)
def verbs_hello(credits, name, features=0, mtu=3, ciphers=0, version=5):
    data = struct.pack("<IHHIIHBBII16s256sI32s32s", 0x42564231, version, len(name), 77, 1234, 1,
                       mtu, 0, credits, 16384, bytes(16), name, features, bytes(32), bytes(32))
    if version >= 5:
        data += struct.pack("<B3s32s", ciphers, bytes(3), bytes(range(32)))
    return data
seed("verbs_bootstrap", "client", verbs_hello(16, b"verbs://10.0.0.1:5000"))
seed("verbs_bootstrap", "server-keyed", verbs_hello(4096, b"", 1))
seed("verbs_bootstrap", "required", verbs_hello(16, b"", 2))
seed("verbs_bootstrap", "client-ciphers", verbs_hello(16, b"", 1 | 4 | 8, ciphers=6))
seed("verbs_bootstrap", "older-version", verbs_hello(16, b"", 1 | 4, version=4))
seed("verbs_bootstrap", "zero-credits", verbs_hello(0, b"x"))

def msg(type_, credits, seg_count, tag, size, cookie, body=b"", msg_class=0):
    data = struct.pack("<BBHIiIQQ", type_, msg_class, credits, seg_count, tag, 0, size, cookie)
    data += body
    return bytes([(len(data) + 15) // 16]) + data.ljust((len(data) + 15) // 16 * 16, b"\0")
seed("verbs_control", "eager", b"\x0f\x08\x04" + msg(1, 0, 0, 3, 16, 0, bytes(16)))
seed("verbs_control", "unexpected-credit",
     b"\x0f\x04\x04" + msg(2, 2, 0, 3, 32, 0, bytes(32), 5) + msg(6, 1, 0, 0, 0, 0))
seed("verbs_control", "rts",
     b"\x0f\x08\x04" + msg(3, 0, 2, 1, 3000, 9, struct.pack("<QQIIQQII", 0x1000, 1000, 5, 0,
                                                            0x9000, 2000, 5, 0)))
# Encrypted (first byte's bit 6): one segment of the sealed size (70000 + 2 tags of 16).
seed("verbs_control", "rts-sealed",
     b"\x4f\x08\x04" + msg(3, 0, 1, 1, 70000, 9, struct.pack("<QQII", 0x1000, 70032, 5, 0)))
seed("verbs_control", "fin-cancel", b"\x0f\x08\x04" + msg(4, 0, 0, 0, 0, 9) + msg(5, 0, 0, 0, 0, 9))

# --- text
for name, text in [("list", "tcp://node1:3334,shm://server.0, tcp://[::1]:80 ,"),
                   ("v6", "tcp://[fe80::1%eth0]:3334"), ("listen", "tcp://0.0.0.0"),
                   ("hostport", "example.org:65535"), ("verbs", "verbs://10.1.2.3:5000")]:
    seed("address", name, text)
# The first byte picks a row of the whole table (method::all_settings(): support's rows, then
# tcp's, shm's and verbs') by index.
for name, row, text in [("quota", 1, "64M"), ("limit", 4, "16K"), ("flag", 5, "1"),
                        ("spin", 10, "50"), ("timeout", 18, "10s"), ("choice", 13, "auto"),
                        ("text", 7, "id=a type=tcp plane=10.0.0.0/8 endpts=1 ports=1000"),
                        ("negative", 37, "-1"), ("options", 0, "tcp_spin_us=20,shm_ring_slots=128")]:
    seed("settings", name, bytes([row]) + text.encode())
seed("planes_text", "request",
     b"\0id=bmi.pfs type=tcp endpts=4! plane=storage! qos=bulk! bw=600 key=yes!\n"
     b"id=bmi.ckpt type=tcp endpts=4 plane=storage bw=600\n")
seed("planes_text", "allocation",
     b"\1id=bmi.pfs type=tcp plane=10.20.0.0/16 endpts=4 ports=32000-32003 qos=bulk bw=600 "
     b"key_file=/run/bmi-job42/bmi.pfs.key\n"
     b"id=bmi.ckpt type=tcp plane=10.20.0.0/16 endpts=4 ports=32004-32007,33000 bw=400 degraded=bw;"
     b"id=rdma type=verbs plane=mlx5_0:1 endpts=1\n")
seed("planes_text", "inventory",
     b"\2# planes\nstorage = tcp 10.20.0.0/16 ports=32000-32999 bw=10000 qos=bulk,fast\n"
     b"fabric  = verbs mlx5_0:1\nv6 = tcp fe80::/64\n")

# --- tcp records (tcp_records.hpp): the choice byte is valid records (low 2 bits) and the
# receive's piece size (index >> 2 into 1, 24, 4096, 5000, 64 KiB, 70000); then the records'
# plaintext length less one (u16); then raw bytes that follow them on the wire.
def records(valid, piece, length, raw=b""):
    return bytes([valid | piece << 2]) + struct.pack("<H", length - 1) + raw
seed("tcp_records", "one-full-direct", records(1, 5, 65536))
seed("tcp_records", "two-buffered", records(2, 2, 5000))
seed("tcp_records", "three-small-bytewise", records(3, 0, 24))
seed("tcp_records", "bad-length", records(1, 4, 8000, struct.pack("<I", 0xFFFFFFFF)))
seed("tcp_records", "cut-record", records(0, 5, 1, struct.pack("<I", 100) + bytes(10)))
seed("tcp_records", "forged-after-valid",
     records(2, 5, 8000, struct.pack("<I", 4096) + bytes(4096 + 16)))


def ofi_hello(features, name, nonce=b"", stated=b""):
    return b"\0" + bytes([features]) + struct.pack("<H", len(name)) + name + nonce + stated


seed("ofi_handshake", "keyless-hello", ofi_hello(0, bytes(16)))
seed("ofi_handshake", "keyed-hello",
     ofi_hello(3, bytes(16), bytes(range(32)), b"ofi+tcp://127.0.0.1:3334"))
seed("ofi_handshake", "keyed-answer", b"\1\3" + bytes(range(64)) + b"ofi+tcp://127.0.0.1:3334")
seed("ofi_handshake", "refusal", b"\1\4")
seed("ofi_handshake", "keyed-hello-ciphers",
     ofi_hello(11, bytes(16), bytes(range(32)) + b"\6" + bytes(range(32, 64)),
               b"ofi+tcp://127.0.0.1:3334"))
seed("ofi_handshake", "keyed-answer-cipher",
     b"\1\13" + bytes(range(64)) + b"\2" + bytes(range(32)) + b"ofi+tcp://127.0.0.1:3334")
seed("ofi_handshake", "name-too-long", ofi_hello(0, bytes(300)))
seed("ofi_handshake", "probe", b"\2" + bytes(range(32)) + bytes(16))
seed("ofi_handshake", "probe-no-name", b"\2" + bytes(range(32)))
seed("ofi_handshake", "reset", b"\3" + bytes(range(64)))
seed("ofi_handshake", "reset-short", b"\3" + bytes(range(63)))
for name, text in [("tcp", "ofi+tcp://127.0.0.1:3334"), ("bare", "ofi://node1:3334"),
                   ("shm", "ofi+shm://server.0"), ("raw", "ofi+efa://0x00fe10ab"),
                   ("raw-sockaddr", "ofi+tcp://0x02000d057f000001"), ("domain", "ofi+cxi://cxi1"),
                   ("any-domain", "ofi+psm3://")]:
    seed("ofi_address", name, text)
