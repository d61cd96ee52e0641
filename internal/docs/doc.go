// Package docs has no code: its tests keep README.md and docs/ true to
// the repository. TestLinks checks that every relative link (and anchor)
// of README.md and docs/*.md resolves; TestReadmeCommands runs every
// command of the README's shell code blocks, or finds it in a table of
// commands not run, each with the reason; TestConfigurationDoc checks that
// docs/configuration.md gives every setting with the code's default.
package docs
