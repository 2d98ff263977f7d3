package pyproc

// Warm exposes warm to tests: what Run does after a child accepted code
// under allowed (the second such call sends the warm message).
func (fs *ForkServer) Warm(code string, allowed []string) {
	fs.warm(fs.warmKeyOf(code, allowed, false), code, false)
}
