package version

import "fmt"

// ReleaseURL is where a release's plugin archives are published;
// %s is the version with its leading v.
const ReleaseURL = "https://github.com/torus-mpi/torus/releases/download/%s"

// Platforms are the os/arch pairs kubectl-mpi is released for.
var Platforms = []Platform{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"},
}

// Platform is a GOOS/GOARCH pair.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Binary is the executable's name inside the archive.
func (p Platform) Binary() string {
	if p.OS == "windows" {
		return "kubectl-mpi.exe"
	}
	return "kubectl-mpi"
}

// Archive is the archive's file name for a version (with its leading v).
func (p Platform) Archive(version string) string {
	ext := ".tar.gz"
	if p.OS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("kubectl-mpi_%s_%s_%s%s", version, p.OS, p.Arch, ext)
}
