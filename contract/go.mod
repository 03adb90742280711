module github.com/eskv/eskv/contract

go 1.24
