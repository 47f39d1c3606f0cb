// One allocation the memory budget cannot hold fails inside the program, catchably.
try {
  const buffer = new ArrayBuffer(2 ** 30);
  return ["allocated", buffer.byteLength];
} catch (error) {
  return "caught";
}
