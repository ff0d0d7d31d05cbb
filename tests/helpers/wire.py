"""Hand-encoded protobuf wire format, for headers a writer would never produce."""


def varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def ld(field, payload):
    """A length-delimited field."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def vi(field, value):
    """A varint field."""
    return varint(field << 3) + varint(value)
