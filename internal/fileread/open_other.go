//go:build !unix

package fileread

// NonBlock is 0 where open has no such flag.
const NonBlock = 0

// NoFollow is 0 where open has no such flag.
const NoFollow = 0
