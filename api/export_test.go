package api

// The verb lists for the external tests' expected messages.
var (
	VerbList = verbList
	Verbs    = verbs
)
