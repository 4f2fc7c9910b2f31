package config

import "github.com/spf13/pflag"

// File is the configuration file a program reads: the one --config names
// on fs (parsed), else NICO_CONFIG, else "".
func File(fs *pflag.FlagSet) string { return configPath(fs) }
