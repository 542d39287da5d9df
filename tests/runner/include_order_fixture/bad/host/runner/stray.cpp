// fixture: a runner file outside the folders
