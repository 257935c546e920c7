// Placeholder translation unit so the library exists before the CLI sources land.
namespace servelab {
const char* Version() { return "0.1.0"; }
}  // namespace servelab
