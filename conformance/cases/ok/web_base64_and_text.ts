// Base64 and text codecs, as Python's base64 and str/bytes do them.
const utf8 = new TextEncoder().encode("héllo, 世界 😀");
const binary = Array.from(utf8, (b) => String.fromCharCode(b)).join("");
const decoded = atob(btoa(binary));
return {
  utf8: Array.from(utf8),
  base64: btoa(binary),
  round_trip: new TextDecoder().decode(Uint8Array.from(decoded, (c) => c.charCodeAt(0))),
  replaced: new TextDecoder().decode(new Uint8Array([0x61, 0xff, 0x62, 0xe2, 0x82])),
  shift_jis: new TextDecoder("shift_jis").decode(new Uint8Array([0x82, 0xa0, 0x93, 0xfa, 0x96, 0x7b])),
  utf16le: new TextDecoder("utf-16le").decode(new Uint8Array([0x41, 0x00, 0x3d, 0xd8, 0x00, 0xde])),
  euc_kr: new TextDecoder("euc-kr").decode(new Uint8Array([0xc7, 0xd1, 0xb1, 0xdb])),
};
