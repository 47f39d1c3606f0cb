# Base64 and text codecs, as TypeScript's btoa/atob and TextEncoder/TextDecoder do them.
import base64

utf8 = "héllo, 世界 😀".encode()
return {
    "utf8": list(utf8),
    "base64": base64.b64encode(utf8).decode(),
    "round_trip": base64.b64decode(base64.b64encode(utf8)).decode(),
    "replaced": bytes([0x61, 0xFF, 0x62, 0xE2, 0x82]).decode("utf-8", "replace"),
    "shift_jis": bytes([0x82, 0xA0, 0x93, 0xFA, 0x96, 0x7B]).decode("shift_jis"),
    "utf16le": bytes([0x41, 0x00, 0x3D, 0xD8, 0x00, 0xDE]).decode("utf-16-le"),
    "euc_kr": bytes([0xC7, 0xD1, 0xB1, 0xDB]).decode("euc-kr"),
}
