# Shortcuts for ./dev.sh, which does the work (and needs nothing but bash).
.PHONY: up test down bench install screenshots
up:
	./dev.sh up
test:
	./dev.sh test
down:
	./dev.sh down
bench:
	./dev.sh bench
install:
	./dev.sh install
screenshots:
	./dev.sh screenshots
