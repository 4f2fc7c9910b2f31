//go:build !failpoints

package failpoint

const armedBuild = false
