// fixture: a runner file in a subfolder, which the build would not compile
