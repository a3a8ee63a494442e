"""Files that hold: written whole or not at all (:mod:`agents.storage.files`), sealed and checked before use
(:mod:`agents.storage.integrity`). Every room that writes or resumes from a file stands on this one."""
