// Wrapper module that builds molt-s3, the lab's S3-compatible server (see main.go and
// tools/setup.sh), from github.com/johannesboyne/gofakes3 (MIT).
module molt.local/toolchain/s3

go 1.26

require github.com/johannesboyne/gofakes3 v1.2.0

require (
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	go.shabbyrobe.org/gocovmerge v0.0.0-20230507111327-fa4f82cfbf4d // indirect
	golang.org/x/tools v0.8.0 // indirect
)
