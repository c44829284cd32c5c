"""Settings for the whole test run."""

import signal

# A run started in the background of a non-interactive shell (`nohup scripts/test.sh &`) inherits SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler; an ignored signal also stays ignored in
# every process the tests start. The Ctrl-C tests (in-process, and of `gpuprov launch`) need it delivered;
# a handler set here is reset to the default in child processes at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
