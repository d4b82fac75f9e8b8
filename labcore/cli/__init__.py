"""``python -m labcore``: the command line. :mod:`.main` builds the parser and runs a subcommand; each larger
subcommand has its own module (:mod:`.analyze`, :mod:`.export`, :mod:`.recipe`, :mod:`.store`, :mod:`.tune`,
:mod:`.worker`), and :mod:`.args` holds the arguments and help texts they share."""
