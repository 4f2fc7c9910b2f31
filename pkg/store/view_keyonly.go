package store

// KeyOnly is the range of one key without its value: whether it exists,
// its revisions and lease.
func KeyOnly(key string) Range { return Range{key: key, keysOnly: true} }
