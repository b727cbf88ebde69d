module github.com/memtide/memtide/sdk/go

go 1.21
